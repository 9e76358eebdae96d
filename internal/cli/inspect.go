package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

// TODO(owner): placeholder until the inspect command lands.
func newInspectCommand(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "inspect",
		Short: "Describe a dataset",
		RunE: func(cmd *cobra.Command, args []string) error {
			return errors.New("inspect: not implemented yet")
		},
	}
}
