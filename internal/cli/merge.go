package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

// TODO(owner): placeholder until the merge command lands.
func newMergeCommand(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "merge",
		Short: "Merge sub-dataset indexes into one",
		RunE: func(cmd *cobra.Command, args []string) error {
			return errors.New("merge: not implemented yet")
		},
	}
}
