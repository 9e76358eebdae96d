package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

// TODO(owner): placeholder until the ls command lands.
func newLsCommand(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "ls",
		Short: "List objects under a URL",
		RunE: func(cmd *cobra.Command, args []string) error {
			return errors.New("ls: not implemented yet")
		},
	}
}
