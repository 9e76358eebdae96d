package cache

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// reconcile applies the size check and keep_zip rule to files already on
// disk. Files someone holds locked are left alone. Call under the
// directory lock.
func (d *Dataset) reconcile() error {
	dir, err := os.Open(d.dir)
	if err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	defer dir.Close()
	for _, sh := range d.src.Shards {
		for _, f := range sh.Files {
			rawOK, err := d.checkSize(dir, f.Raw, f.RawBytes)
			if err != nil {
				return err
			}
			if f.Zip == "" {
				continue
			}
			zipOK, err := d.checkSize(dir, f.Zip, f.ZipBytes)
			if err != nil {
				return err
			}
			if rawOK && zipOK && !d.src.KeepZip {
				if _, err := removeUnlocked(d.path(f.Zip)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// checkSize reports whether rel exists with the declared size, deleting it
// (when unlocked) if its size is wrong. dir is the dataset's directory,
// open.
func (d *Dataset) checkSize(dir *os.File, rel string, want int64) (bool, error) {
	size, ok, err := statAt(dir, d.dir, filepath.FromSlash(rel), true)
	if err != nil {
		return false, fmt.Errorf("cache: %w", err)
	}
	if !ok {
		return false, nil
	}
	if size == want {
		return true, nil
	}
	_, err = removeUnlocked(d.path(rel))
	return false, err
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
