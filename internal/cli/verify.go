package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

// TODO(owner): placeholder until the verify command lands.
func newVerifyCommand(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "verify",
		Short: "Check a dataset's index, shards, hashes and samples",
		RunE: func(cmd *cobra.Command, args []string) error {
			return errors.New("verify: not implemented yet")
		},
	}
}
