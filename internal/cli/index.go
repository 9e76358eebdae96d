package cli

import (
	"bytes"
	"context"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/stream"
)

func newIndexCommand(e *env) *cobra.Command {
	var out string
	var parallel int
	var sf storeFlags
	cmd := &cobra.Command{
		Use:   "index URLS",
		Short: "Index WebDataset tar shards for streaming",
		Long: `Read the headers of every WebDataset .tar shard URLS names and write an
index.json (shard format "wds": sample count, byte size and header digest per
shard) that makes the tars a streaming dataset with Sluice's full plan:
elastic deterministic order, exact resume, random access, stream mixing.

URLS is a brace pattern ("s3://b/train/shard-{000000..001399}.tar"), a
"::"-separated list of them, or a directory holding .tar objects. Shards are
read in parallel with ranged requests that skip member data (whole shards
are never downloaded where members are large; for small members the headers
are dense and a shard is read through in one request).

The index is written beside the shards (ROOT/index.json, ROOT being the
directory holding them all) unless --out names another place: a local path
or store URL of the index file. A stream given the same URLS, or the
directory, then opens without reading a shard.`,
		Args: cobra.ExactArgs(1),
		RunE: storeRunE(&sf, func(cmd *cobra.Command, args []string) error {
			return runIndex(cmd.Context(), e, args[0], out, parallel)
		}),
	}
	addStoreFlags(cmd, &sf)
	cmd.Flags().StringVar(&out, "out", "", "where to write the index file (default: index.json beside the shards)")
	cmd.Flags().IntVar(&parallel, "parallel", 0, "shards read at once (0: 4×CPUs, at least 16)")
	return cmd
}

func runIndex(ctx context.Context, e *env, spec, out string, parallel int) error {
	td, err := stream.ParseTarDataset(spec)
	if err != nil {
		return fmt.Errorf("index: %w", err)
	}
	root, keys := spec, []string(nil)
	if td != nil {
		root, keys = td.Root, td.Keys
	}
	b, err := openStore(ctx, e, root)
	if err != nil {
		return fmt.Errorf("index: %w", err)
	}
	defer b.Close()
	if keys == nil {
		if keys, err = listTarKeys(ctx, b); err != nil {
			return fmt.Errorf("index: %w", err)
		}
		if len(keys) == 0 {
			return fmt.Errorf("index: no .tar objects under %s", b.URL(""))
		}
	}
	start := time.Now()
	idx, err := stream.BuildTarIndex(ctx, b, keys, &stream.TarIndexOptions{Parallel: parallel})
	if err != nil {
		return fmt.Errorf("index: %w", err)
	}
	took := time.Since(start)
	text := format.AppendIndex(nil, idx)
	dst, key := b, format.IndexFile
	if out != "" {
		dir, file := splitOut(out)
		if dst, err = openStore(ctx, e, dir); err != nil {
			return fmt.Errorf("index: %w", err)
		}
		defer dst.Close()
		key = file
		prefix, ok := relPrefix(dst.URL(""), b.URL(""))
		if !ok {
			return fmt.Errorf("index: --out %s must be in %s or a directory above it (an index names its shards by relative paths)", out, b.URL(""))
		}
		if prefix != "" {
			// Keep basenames relative to the index's own directory.
			for i := range idx.Shards {
				idx.Shards[i].RawData.Basename = prefix + idx.Shards[i].RawData.Basename
			}
			text = format.AppendIndex(nil, idx)
		}
	}
	if err := storage.Upload(ctx, dst, key, bytes.NewReader(text), int64(len(text)), nil); err != nil {
		return fmt.Errorf("index: write %s: %w", dst.URL(key), err)
	}
	var total int64
	for i := range idx.Shards {
		total += idx.Shards[i].RawData.Bytes
	}
	fmt.Fprintf(e.stdout, "indexed %d shards, %d samples, %s in %.2fs (%.1f shards/s); wrote %s\n",
		len(idx.Shards), idx.Samples(), humanBytes(total), took.Seconds(), float64(len(idx.Shards))/max(took.Seconds(), 1e-9), dst.URL(key))
	return nil
}

// listTarKeys lists the .tar objects under b, sorted.
func listTarKeys(ctx context.Context, b storage.Bucket) ([]string, error) {
	var keys []string
	err := b.List(ctx, "", func(o storage.ObjectInfo) error {
		if strings.HasSuffix(strings.ToLower(o.Key), ".tar") {
			keys = append(keys, o.Key)
		}
		return nil
	})
	return keys, err
}

// splitOut splits an index destination into its directory and file name.
func splitOut(out string) (string, string) {
	i := strings.LastIndexByte(out, '/')
	if i < 0 {
		return ".", out
	}
	if i == 0 {
		return "/", out[1:]
	}
	return out[:i], out[i+1:]
}

// relPrefix returns the path from directory URL from down to directory URL
// to ("sub/", "" when equal); ok is false when to is not under from.
func relPrefix(from, to string) (string, bool) {
	from, to = strings.TrimSuffix(from, "/")+"/", strings.TrimSuffix(to, "/")+"/"
	if from == to {
		return "", true
	}
	if !strings.HasPrefix(to, from) {
		return "", false
	}
	return path.Clean(strings.TrimPrefix(to, from)) + "/", true
}
