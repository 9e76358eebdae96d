package mds

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/internal/atomicfile"
)

// SubIndex is one sub-dataset to merge: its index and its directory
// relative to the merged dataset's root (slash-separated).
type SubIndex struct {
	// Dir is the sub-dataset's directory relative to the root, for
	// example "0" or "part3".
	Dir string
	// Index is the sub-dataset's parsed index.json.
	Index *format.Index
}

// MergeIndexes joins sub-dataset indexes as MosaicML's merge_index does
// (spec 2.8): shard lists concatenated in the given order, every file
// basename prefixed with its sub-dataset's directory, and the result in
// the merged layout ({"version": 2, "shards": [...]}). It does no I/O.
func MergeIndexes(subs []SubIndex) (*format.Index, error) {
	out := &format.Index{Merged: true, Shards: []format.ShardInfo{}}
	for _, sub := range subs {
		if err := format.CheckBasename(sub.Dir); err != nil {
			return nil, fmt.Errorf("mds: merge: sub-dataset directory: %w", err)
		}
		for _, s := range sub.Index.Shards {
			s.RawData.Basename = path.Join(sub.Dir, s.RawData.Basename)
			for _, fi := range []**format.FileInfo{&s.ZipData, &s.RawMeta, &s.ZipMeta} {
				if *fi != nil {
					c := **fi
					c.Basename = path.Join(sub.Dir, c.Basename)
					*fi = &c
				}
			}
			out.Shards = append(out.Shards, s)
		}
	}
	return out, nil
}

// FindSubIndexes lists the sub-dataset index files under root, as
// merge_index does for a local root: every index.json below root (not
// root's own), in string order of their paths, so "10" sorts before "2".
// The paths are relative to root and slash-separated.
//
// Deviation from MosaicML, documented in docs/format/mds.md: upstream
// takes any file ending in ".json" (which breaks on JSON-format shards
// named shard.NNNNN.json); Sluice takes only files named index.json.
func FindSubIndexes(root string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || d.Name() != format.IndexFile {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel == format.IndexFile {
			return nil // the root's own index
		}
		out = append(out, rel)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("mds: merge: %w", err)
	}
	sort.Strings(out)
	return out, nil
}

// Merge merges every sub-dataset index found under the local directory
// root (FindSubIndexes) into root/index.json, written atomically, and
// returns the merged index. Each sub-dataset's basenames are prefixed with
// its directory relative to root; for the usual one-level layout
// (root/0/index.json) that is the same as MosaicML's immediate-parent
// prefix, and for deeper layouts it names files that exist. Nothing is
// deleted (MosaicML's keep_local=False would remove the dataset).
func Merge(root string) (*format.Index, error) {
	rels, err := FindSubIndexes(root)
	if err != nil {
		return nil, err
	}
	if len(rels) == 0 {
		return nil, fmt.Errorf("mds: merge: no sub-dataset index.json under %s", root)
	}
	subs := make([]SubIndex, 0, len(rels))
	for _, rel := range rels {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			return nil, fmt.Errorf("mds: merge: %w", err)
		}
		idx, err := format.ParseIndex(b)
		if err != nil {
			var ce *format.CorruptError
			if errors.As(err, &ce) {
				ce.File = rel
			}
			return nil, fmt.Errorf("mds: merge: %w", err)
		}
		subs = append(subs, SubIndex{Dir: path.Dir(rel), Index: idx})
	}
	merged, err := MergeIndexes(subs)
	if err != nil {
		return nil, err
	}
	if err := atomicfile.WriteFile(filepath.Join(root, format.IndexFile), 0o644, format.AppendIndex(nil, merged)); err != nil {
		return nil, fmt.Errorf("mds: merge: %w", err)
	}
	return merged, nil
}
