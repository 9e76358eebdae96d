package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

// TODO(owner): placeholder until the agent command lands.
func newAgentCommand(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "agent",
		Short: "Run the per-node agent",
		RunE: func(cmd *cobra.Command, args []string) error {
			return errors.New("agent: not implemented yet")
		},
	}
}
