package input

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/storage"
)

// wdsIndexError is openMDS's answer for a directory whose index.json lists
// WebDataset tars (sluice index wrote it): the directory is converted as
// those tars, in the index's order.
type wdsIndexError struct {
	root string
	keys []string
}

func (e *wdsIndexError) Error() string {
	return fmt.Sprintf("input: %s: the index lists WebDataset tar shards (format wds), not MDS", e.root)
}

// wdsIndexKeys returns the basenames idx lists when every shard is a
// WebDataset tar, nil otherwise.
func wdsIndexKeys(idx *format.Index) []string {
	keys := make([]string, len(idx.Shards))
	for k := range idx.Shards {
		s := &idx.Shards[k]
		if s.Format != "wds" {
			return nil
		}
		keys[k] = s.RawData.Basename
	}
	return keys
}

// isTarKey reports whether an object key names an uncompressed tar.
func isTarKey(key string) bool { return strings.HasSuffix(strings.ToLower(key), ".tar") }

// dirHoldsTars reports whether the directory behind b looks like a
// directory of WebDataset tars rather than an image folder: listing stops
// at the first .tar object (true) or at the first other object inside a
// subdirectory, where an image folder keeps its files (false). any reports
// whether b holds anything at all.
func dirHoldsTars(ctx context.Context, b storage.Bucket) (tars, any bool, err error) {
	err = b.List(ctx, "", func(o storage.ObjectInfo) error {
		any = true
		if isTarKey(o.Key) {
			tars = true
			return io.EOF
		}
		if strings.Contains(o.Key, "/") {
			return io.EOF
		}
		return nil
	})
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return tars, any, err
}

// tarDirLocations returns the .tar objects of the directory root as
// locations, sorted by key as sluice stream orders a directory of tars, or
// in the order keys gives (an index's).
func tarDirLocations(ctx context.Context, root string, keys []string, bs *buckets) ([]location, error) {
	if dir := localFolderRoot(root); dir != "" {
		return localTarLocations(ctx, root, dir, keys, bs)
	}
	b, err := bs.open(ctx, root)
	if err != nil {
		return nil, fmt.Errorf("input: %w", err)
	}
	if keys == nil {
		err := b.List(ctx, "", func(o storage.ObjectInfo) error {
			if isTarKey(o.Key) {
				if len(keys) >= format.MaxIndexShards {
					return fmt.Errorf("more than %d .tar objects", format.MaxIndexShards)
				}
				keys = append(keys, o.Key)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("input: list %s: %w", root, err)
		}
		if len(keys) == 0 {
			return nil, fmt.Errorf("input: %s holds no .tar files", root)
		}
		sort.Strings(keys)
	}
	locs := make([]location, len(keys))
	for i, k := range keys {
		if err := format.CheckBasename(k); err != nil {
			return nil, fmt.Errorf("input: %s: %w", root, err)
		}
		locs[i] = location{b: b, key: k, name: strings.TrimSuffix(root, "/") + "/" + k}
	}
	return locs, nil
}

// localTarLocations is tarDirLocations for a local directory, whose links
// are followed as an image folder's are: each tar is read where its link
// leads (the directory's store skips links that lead out of it).
func localTarLocations(ctx context.Context, root, dir string, keys []string, bs *buckets) ([]location, error) {
	lf, err := walkLocalFolder(ctx, dir, func(string, int64) error { return nil })
	if err != nil {
		return nil, err
	}
	if keys == nil {
		for k := range lf.real {
			if isTarKey(k) {
				if len(keys) >= format.MaxIndexShards {
					return nil, fmt.Errorf("input: %s: more than %d .tar files", root, format.MaxIndexShards)
				}
				keys = append(keys, k)
			}
		}
		if len(keys) == 0 {
			return nil, fmt.Errorf("input: %s holds no .tar files", root)
		}
		sort.Strings(keys)
	}
	locs := make([]location, len(keys))
	for i, k := range keys {
		name := strings.TrimSuffix(root, "/") + "/" + k
		real, ok := lf.real[k]
		if !ok {
			return nil, fmt.Errorf("input: %s: no such file", name)
		}
		b, err := bs.open(ctx, filepath.Dir(real))
		if err != nil {
			return nil, fmt.Errorf("input: %w", err)
		}
		locs[i] = location{b: b, key: filepath.Base(real), name: name}
	}
	return locs, nil
}
