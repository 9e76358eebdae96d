package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

// TODO(owner): placeholder until the plan command lands.
func newPlanCommand(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "plan",
		Short: "Print the epoch plan",
		RunE: func(cmd *cobra.Command, args []string) error {
			return errors.New("plan: not implemented yet")
		},
	}
}
