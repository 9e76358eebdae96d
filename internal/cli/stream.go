package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

// TODO(owner): placeholder until the stream command lands.
func newStreamCommand(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "stream",
		Short: "Stream a dataset as one rank would and report figures",
		RunE: func(cmd *cobra.Command, args []string) error {
			return errors.New("stream: not implemented yet")
		},
	}
}
