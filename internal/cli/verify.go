package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

// verifyUnsoundCode is verify's exit code when the dataset has problems.
const verifyUnsoundCode = 2

func newVerifyCommand(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "verify DIR",
		Short: "Check a dataset's index, files, hashes and samples",
		Long: `Check the dataset in DIR: index.json parses; every shard file exists with the
size and digests the index records; and every sample decodes. For MDS shards
the decompressed form is also checked against the raw digests and each
shard's header and offsets against the index. JSON-lines and CSV/TSV/XSV
shards are checked through their own readers.

Exit status: 0 when the dataset is sound, 2 when problems were found (each
printed on stderr with file, shard, sample and problem), 1 when the check
could not run.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := localDatasetDir(e, args[0])
			if err != nil {
				return err
			}
			st, err := verifyDataset(cmd.Context(), dir, func(p error) {
				fmt.Fprintf(e.stderr, "problem: %v\n", p)
			})
			if err != nil {
				return fmt.Errorf("verify: %w", err)
			}
			fmt.Fprintf(e.stdout, "%d shards, %d samples, %d files, %d bytes checked: %d problems\n",
				st.Shards, st.Samples, st.Files, st.Bytes, st.Problems)
			if st.Problems > 0 {
				return &ExitError{Code: verifyUnsoundCode, Err: fmt.Errorf("verify: %s: %d problems", dir, st.Problems)}
			}
			return nil
		},
	}
}
