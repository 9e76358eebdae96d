package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

// TODO(owner): placeholder until the cp command lands.
func newCpCommand(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "cp",
		Short: "Copy a dataset between stores",
		RunE: func(cmd *cobra.Command, args []string) error {
			return errors.New("cp: not implemented yet")
		},
	}
}
