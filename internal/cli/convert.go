package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

// TODO(owner): placeholder until the convert command lands.
func newConvertCommand(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "convert",
		Short: "Convert raw data into shards",
		RunE: func(cmd *cobra.Command, args []string) error {
			return errors.New("convert: not implemented yet")
		},
	}
}
