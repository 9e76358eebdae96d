package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicedata/sluice/storage"
)

// maxLsIndexSize bounds the index.json ls and cp read from stores that
// cannot list.
const maxLsIndexSize = 256 << 20

func newLsCommand(e *env) *cobra.Command {
	var long, exact, asJSON bool
	var sf storeFlags
	cmd := &cobra.Command{
		Use:   "ls URL",
		Short: "List objects under a URL",
		Long: `List the objects under a store URL, in key order: a local directory (plain path
or file://), s3://bucket/prefix, gs://bucket/prefix, az://container/prefix or
an http(s):// dataset. Plain HTTP cannot list, so for it ls lists the files
the dataset's index.json names.

With -l each line shows size, modification time and key; a summary line goes
to standard error. --json prints one JSON object per object instead:
{"key", "size", "mod_time"} (mod_time RFC 3339, "" when the store has none).`,
		Example: `  sluice ls s3://my-bucket/datasets/c4/
  sluice ls -l ./out/train`,
		Args: cobra.ExactArgs(1),
		RunE: storeRunE(&sf, func(cmd *cobra.Command, args []string) error {
			return runLs(cmd.Context(), e, args[0], long, exact, asJSON)
		}),
	}
	addStoreFlags(cmd, &sf)
	cmd.Flags().BoolVarP(&long, "long", "l", false, "show size and modification time")
	cmd.Flags().BoolVar(&exact, "bytes", false, "with -l, show sizes in bytes rather than KiB/MiB/GiB")
	cmd.Flags().BoolVar(&asJSON, "json", false, `print one JSON object per line: {"key", "size", "mod_time"}`)
	return cmd
}

// lsEntry is one line of ls --json.
type lsEntry struct {
	Key     string `json:"key"`
	Size    int64  `json:"size"`
	ModTime string `json:"mod_time"`
}

func runLs(ctx context.Context, e *env, rawURL string, long, exact, asJSON bool) (err error) {
	b, err := openStore(ctx, e, rawURL)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, ignoreClosed(b.Close())) }()
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	var n, total int64
	printObject := func(info storage.ObjectInfo) error {
		n++
		total += info.Size
		if asJSON {
			ent := lsEntry{Key: info.Key, Size: info.Size}
			if !info.ModTime.IsZero() {
				ent.ModTime = info.ModTime.UTC().Format(time.RFC3339Nano)
			}
			b, err := json.Marshal(ent)
			if err != nil {
				return err
			}
			_, err = e.stdout.Write(append(b, '\n'))
			return err
		}
		if !long {
			_, err := fmt.Fprintln(e.stdout, info.Key)
			return err
		}
		size := humanBytes(info.Size)
		if exact {
			size = fmt.Sprint(info.Size)
		}
		mod := "-"
		if !info.ModTime.IsZero() {
			mod = info.ModTime.Local().Format(time.DateTime)
		}
		_, err := fmt.Fprintf(tw, "%s\t  %s\t  %s\t\n", size, mod, info.Key)
		return err
	}
	// Stream the listing; a store that cannot list is listed through its
	// index.json.
	err = b.List(ctx, "", printObject)
	if errors.Is(err, errors.ErrUnsupported) {
		var objects []storage.ObjectInfo
		objects, err = indexObjects(ctx, b)
		for _, info := range objects {
			if err != nil {
				break
			}
			err = printObject(info)
		}
	}
	if err != nil {
		return fmt.Errorf("ls %s: %w", storage.RedactURL(rawURL), err)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("ls %s: no objects there", storage.RedactURL(rawURL))
	}
	if long && !asJSON {
		fmt.Fprintf(e.stderr, "%d objects, %s\n", n, humanBytes(total))
	}
	return nil
}

// ignoreClosed drops the error of closing a Bucket twice.
func ignoreClosed(err error) error {
	if errors.Is(err, storage.ErrClosed) {
		return nil
	}
	return err
}

// listObjects returns every object of b in key order. For a store that
// cannot list (plain HTTP) it returns index.json and the shard files that
// index names, with their sizes from the index.
func listObjects(ctx context.Context, b storage.Bucket) ([]storage.ObjectInfo, error) {
	var objects []storage.ObjectInfo
	err := b.List(ctx, "", func(info storage.ObjectInfo) error {
		objects = append(objects, info)
		return nil
	})
	if errors.Is(err, errors.ErrUnsupported) {
		return indexObjects(ctx, b)
	}
	return objects, err
}

// lsIndex is the part of an MDS index.json that names files.
type lsIndex struct {
	Shards []struct {
		RawData *lsFile `json:"raw_data"`
		ZipData *lsFile `json:"zip_data"`
	} `json:"shards"`
}

type lsFile struct {
	Basename string `json:"basename"`
	Bytes    int64  `json:"bytes"`
}

// indexObjects lists a dataset through its index.json: the index itself
// and, per shard, the compressed file when there is one (stores hold
// those) or else the raw one.
func indexObjects(ctx context.Context, b storage.Bucket) ([]storage.ObjectInfo, error) {
	info, err := b.Stat(ctx, "index.json")
	if err != nil {
		return nil, fmt.Errorf("the store cannot list, and it has no index.json to list from: %w", err)
	}
	data, err := storage.ReadAll(ctx, b, "index.json", maxLsIndexSize)
	if err != nil {
		return nil, err
	}
	var idx lsIndex
	if err := json.Unmarshal(data, &idx); err != nil {
		return nil, fmt.Errorf("%s: %w", b.URL("index.json"), err)
	}
	objects := []storage.ObjectInfo{info}
	seen := map[string]bool{"index.json": true}
	for i, sh := range idx.Shards {
		f := sh.ZipData
		if f == nil {
			f = sh.RawData
		}
		if f == nil {
			return nil, fmt.Errorf("%s: shard %d names no file", b.URL("index.json"), i)
		}
		if err := storage.ValidateKey(f.Basename); err != nil || f.Bytes < 0 {
			return nil, fmt.Errorf("%s: shard %d: bad file %q (%d bytes): %v", b.URL("index.json"), i, f.Basename, f.Bytes, err)
		}
		if seen[f.Basename] {
			continue
		}
		seen[f.Basename] = true
		objects = append(objects, storage.ObjectInfo{Key: f.Basename, Size: f.Bytes})
	}
	return objects, nil
}
