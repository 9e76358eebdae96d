package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

// verifyUnsoundCode is verify's exit code when the dataset has problems.
const verifyUnsoundCode = 2

// verifyReport is verify --json's output.
type verifyReport struct {
	Dataset  string   `json:"dataset"`
	Sound    bool     `json:"sound"`
	Shards   int64    `json:"shards"`
	Samples  int64    `json:"samples"`
	Files    int      `json:"files"`
	Bytes    int64    `json:"bytes"`
	Problems []string `json:"problems"`
}

func newVerifyCommand(e *env) *cobra.Command {
	var asJSON bool
	var sf storeFlags
	cmd := &cobra.Command{
		Use:   "verify DATASET",
		Short: "Check a dataset's index, files, hashes and samples",
		Long: `Check the dataset at DATASET (a local directory or a store URL: s3://,
gs://, az://, https://, file://): index.json parses; every shard file exists
with the size and digests the index records; and every sample decodes.
Compressed files are also checked against the raw digests after
decompression. MDS shards' headers and offsets, and the JSON-lines and
CSV/TSV/XSV shards' meta files (offsets and config), are checked against
the index. The shards of a remote dataset are downloaded into a temporary
directory a few at a time and removed once checked.

Exit status: 0 when the dataset is sound, 2 when problems were found (each
printed on stderr with file, shard, sample and problem), 1 when the check
could not run. --json prints {"dataset", "sound", "shards", "samples",
"files", "bytes", "problems": [...]} on stdout instead (same exit status).`,
		Args: cobra.ExactArgs(1),
		RunE: storeRunE(&sf, func(cmd *cobra.Command, args []string) error {
			d, err := openDataset(cmd.Context(), e, args[0])
			if err != nil {
				return fmt.Errorf("verify: %w", err)
			}
			defer d.Close()
			problems := []string{}
			st, err := verifyDataset(cmd.Context(), d, func(p error) {
				problems = append(problems, p.Error())
				if !asJSON {
					fmt.Fprintf(e.stderr, "problem: %v\n", p)
				}
			})
			if err != nil {
				return fmt.Errorf("verify: %w", err)
			}
			if asJSON {
				if err := writeJSON(e.stdout, verifyReport{Dataset: args[0], Sound: st.Problems == 0, Shards: st.Shards,
					Samples: st.Samples, Files: st.Files, Bytes: st.Bytes, Problems: problems}); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(e.stdout, "%d shards, %d samples, %d files, %d bytes checked: %d problems\n",
					st.Shards, st.Samples, st.Files, st.Bytes, st.Problems)
			}
			if st.Problems > 0 {
				return &ExitError{Code: verifyUnsoundCode, Err: fmt.Errorf("verify: %s: %d problems", args[0], st.Problems)}
			}
			return nil
		}),
	}
	addStoreFlags(cmd, &sf)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}
