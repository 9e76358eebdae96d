package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

// TODO(owner): placeholder until the dump command lands.
func newDumpCommand(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "dump",
		Short: "Print samples as canonical JSON lines",
		RunE: func(cmd *cobra.Command, args []string) error {
			return errors.New("dump: not implemented yet")
		},
	}
}
