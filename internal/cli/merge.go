package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/mds"
	"github.com/sluicedata/sluice/storage"
)

func newMergeCommand(e *env) *cobra.Command {
	var indexes []string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "merge DATASET",
		Short: "Merge sub-dataset indexes into one",
		Long: `Join the index.json of every sub-dataset below DATASET (DATASET/0,
DATASET/1, ... as parallel conversions write them) into DATASET/index.json,
as MosaicML's merge_index does: sub-datasets in string order of their
paths, basenames prefixed with the sub-dataset directory. Shard files stay
where they are and nothing is deleted.

DATASET is a local directory or a store URL (s3://, gs://, az://, file://).
In a store, the sub-indexes are found by listing the objects below the root
whose name is index.json; the merged index is uploaded in one piece, so
readers see the old index or the new one, never a partial one. Stores that
cannot list (plain HTTP) cannot be merged.

--index names the sub-dataset index files to merge instead (paths relative
to DATASET, repeated, merged in the order given), as merge_index(files, out)
does in MosaicML.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			d, err := openDataset(ctx, e, args[0])
			if err != nil {
				return fmt.Errorf("merge: %w", err)
			}
			defer d.Close()
			var idx *format.Index
			if d.local != "" && len(indexes) == 0 {
				idx, err = mds.Merge(d.local)
			} else {
				idx, err = mergeRemote(ctx, d.bucket, indexes)
			}
			if err != nil {
				return fmt.Errorf("merge: %w", err)
			}
			if asJSON {
				return writeJSON(e.stdout, map[string]any{
					"index": d.bucket.URL(format.IndexFile), "shards": len(idx.Shards), "samples": idx.Samples(),
				})
			}
			fmt.Fprintf(e.stdout, "merged %d shards, %d samples into %s\n", len(idx.Shards), idx.Samples(), d.bucket.URL(format.IndexFile))
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&indexes, "index", nil, "a sub-dataset index.json to merge, relative to DATASET (repeat; default: every one below DATASET)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

// mergeRemote merges the sub-dataset indexes below the root of b into the
// root's index.json, as mds.Merge does for a local directory: every object
// named index.json below the root (not the root's own), in key order,
// read in parallel. A non-empty keys names the sub-indexes instead.
func mergeRemote(ctx context.Context, b storage.Bucket, keys []string) (*format.Index, error) {
	for i, k := range keys {
		k = strings.TrimPrefix(path.Clean("/"+filepath.ToSlash(k)), "/")
		if k == format.IndexFile || k == "" || k == "." {
			return nil, fmt.Errorf("--index %q: want a sub-dataset's index file below the root", keys[i])
		}
		keys[i] = k
	}
	var err error
	if len(keys) == 0 {
		err = b.List(ctx, "", func(o storage.ObjectInfo) error {
			if path.Base(o.Key) == format.IndexFile && o.Key != format.IndexFile {
				keys = append(keys, o.Key)
			}
			return nil
		})
	}
	if errors.Is(err, errors.ErrUnsupported) {
		return nil, fmt.Errorf("%s: the store cannot list its objects, so sub-datasets cannot be found: %w", b.URL(""), err)
	}
	if err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("no sub-dataset index.json under %s", b.URL(""))
	}
	subs := make([]mds.SubIndex, len(keys))
	err = forEachLimit(ctx, len(keys), 16, func(ctx context.Context, i int) error {
		raw, err := storage.ReadAll(ctx, b, keys[i], maxIndexBytes)
		if err != nil {
			return err
		}
		idx, err := format.ParseIndex(raw)
		if err != nil {
			var ce *format.CorruptError
			if errors.As(err, &ce) {
				ce.File = keys[i]
			}
			return err
		}
		subs[i] = mds.SubIndex{Dir: path.Dir(keys[i]), Index: idx}
		return nil
	})
	if err != nil {
		return nil, err
	}
	merged, err := mds.MergeIndexes(subs)
	if err != nil {
		return nil, err
	}
	text := format.AppendIndex(nil, merged)
	if err := storage.Upload(ctx, b, format.IndexFile, bytes.NewReader(text), int64(len(text)), &storage.WriteOptions{ContentType: "application/json"}); err != nil {
		return nil, err
	}
	return merged, nil
}
