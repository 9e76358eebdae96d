package cli

import (
	"bufio"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sluicedata/sluice/format/mds"
)

func newDumpCommand(e *env) *cobra.Command {
	var from, count int64
	cmd := &cobra.Command{
		Use:   "dump DIR",
		Short: "Print samples as canonical JSON lines",
		Long: `Print samples of the MDS dataset in DIR, one JSON line each, in the canonical
form of the reference fixtures' expected.jsonl:

  {"cols": {NAME: {"raw_len": N, "raw_sha256": HEX, "v": VALUE}}, "i": I, "shard": K}

so that any dataset can be compared line by line with what MosaicML reads.
JPEG pixels are what Go decodes. pkl values are never unpickled; they are
shown as {"pkl_b64": BASE64}.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := localDatasetDir(e, args[0])
			if err != nil {
				return err
			}
			if from < 0 {
				return fmt.Errorf("dump: --from must be >= 0")
			}
			r, err := mds.Open(dir, &mds.Options{AllowUnsafeTypes: true})
			if err != nil {
				return fmt.Errorf("dump: %w", err)
			}
			defer r.Close()
			out := bufio.NewWriterSize(e.stdout, 1<<16)
			sc := r.RawScan(from)
			defer sc.Close()
			var line []byte
			for n := int64(0); (count < 0 || n < count) && sc.Next(); n++ {
				if err := cmd.Context().Err(); err != nil {
					return err
				}
				i, k := sc.Index(), sc.ShardIndex()
				line, err = mds.AppendDump(line[:0], i, k, sc.CurrentShard(), int(i-r.Offset(k)))
				if err != nil {
					out.Flush()
					return fmt.Errorf("dump: %w", err)
				}
				line = append(line, '\n')
				if _, err := out.Write(line); err != nil {
					return err
				}
			}
			if err := sc.Err(); err != nil {
				out.Flush()
				return fmt.Errorf("dump: %w", err)
			}
			return out.Flush()
		},
	}
	cmd.Flags().Int64Var(&from, "from", 0, "first global sample index")
	cmd.Flags().Int64Var(&count, "count", -1, "number of samples (-1: to the end)")
	return cmd
}
