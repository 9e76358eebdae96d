package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sluicedata/sluice/format/mds"
)

func newMergeCommand(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "merge DIR",
		Short: "Merge sub-dataset indexes into one",
		Long: `Join the index.json of every sub-dataset below DIR (DIR/0, DIR/1, ... as
parallel conversions write them) into DIR/index.json, as MosaicML's
merge_index does: sub-datasets in string order of their paths, basenames
prefixed with the sub-dataset directory. Shard files stay where they are and
nothing is deleted.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := localDatasetDir(e, args[0])
			if err != nil {
				return err
			}
			idx, err := mds.Merge(dir)
			if err != nil {
				return fmt.Errorf("merge: %w", err)
			}
			fmt.Fprintf(e.stdout, "merged %d shards, %d samples into %s/index.json\n", len(idx.Shards), idx.Samples(), dir)
			return nil
		},
	}
}
