package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sluicedata/sluice/bench"
)

func newPlotCommand(e *env) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "plot DIR",
		Short: "Draw the charts of a sluice bench run (or sluice simulate --plot) from its CSV files",
		Long: `Read summary.csv, steps.csv and gpu.csv (when present) that sluice bench (or
sluice simulate --plot, one configuration per --vary setting) wrote in DIR and
draw, in DIR: throughput per configuration, the input wait of every step over
time and its distribution per configuration, and the utilization of each GPU
over time.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			files, err := bench.Plot(args[0], format)
			if err != nil {
				return err
			}
			for _, p := range files {
				fmt.Fprintf(e.stdout, "wrote %s\n", p)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&format, "format", "png", "chart format: png or svg")
	return cmd
}
