package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

// TODO(owner): placeholder until the quickstart command lands.
func newQuickstartCommand(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "quickstart",
		Short: "Make a synthetic dataset, stream it, stop, resume and check",
		RunE: func(cmd *cobra.Command, args []string) error {
			return errors.New("quickstart: not implemented yet")
		},
	}
}
