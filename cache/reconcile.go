package cache

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// reconcile applies the size check and keep_zip rule to files already on
// disk, and returns the total size of the files under the dataset's
// directory afterwards (as recount sums them; the cache's metadata
// directory left out when it is the root). Files someone holds locked are
// left alone. Call under the directory lock.
//
// It reads the directory once, stat'ing each file there once (the sizes
// the sum needs), and checks the shards' files against that listing: a
// 40k-shard dataset costs one stat per file present, not one per name the
// index lists (raw and compressed) plus the recount's. Files in
// subdirectories (basenames with a slash) are stat'ed by name.
func (d *Dataset) reconcile() (int64, error) {
	top := make(map[string]topFile, len(d.src.Shards))
	total, top, err := scanDir(d.dir, d.dir == d.c.dir, "", top)
	if err != nil {
		return 0, fmt.Errorf("cache: %w", err)
	}
	dir, err := os.Open(d.dir)
	if err != nil {
		return 0, fmt.Errorf("cache: %w", err)
	}
	defer dir.Close()
	removed := false
	check := func(rel string, want int64) (bool, error) {
		var size int64
		var ok bool
		if strings.Contains(rel, "/") {
			if size, ok, err = statAt(dir, d.dir, filepath.FromSlash(rel), true); err != nil {
				return false, fmt.Errorf("cache: %w", err)
			}
		} else {
			var f topFile
			f, ok = top[rel]
			size = f.size
		}
		if !ok {
			return false, nil
		}
		if size == want {
			return true, nil
		}
		gone, err := removeUnlocked(d.path(rel))
		removed = removed || gone
		return false, err
	}
	for _, sh := range d.src.Shards {
		for _, f := range sh.Files {
			rawOK, err := check(f.Raw, f.RawBytes)
			if err != nil {
				return 0, err
			}
			if f.Zip == "" {
				continue
			}
			zipOK, err := check(f.Zip, f.ZipBytes)
			if err != nil {
				return 0, err
			}
			if rawOK && zipOK && !d.src.KeepZip {
				gone, err := removeUnlocked(d.path(f.Zip))
				if err != nil {
					return 0, err
				}
				removed = removed || gone
			}
		}
	}
	if removed {
		// Rare (wrong sizes, or compressed files kept by another run):
		// sum the directory again.
		if total, err = sumDir(d.dir, d.dir == d.c.dir); err != nil {
			return 0, fmt.Errorf("cache: %w", err)
		}
	}
	return total, nil
}

// removeUnlocked deletes path unless another open file holds a lock on it.
func removeUnlocked(path string) (bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("cache: %w", err)
	}
	defer f.Close()
	ok, err := tryLock(f, true)
	if err != nil || !ok {
		return false, err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("cache: %w", err)
	}
	return true, nil
}
