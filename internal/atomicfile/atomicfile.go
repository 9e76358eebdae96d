// Package atomicfile writes local files that appear whole or not at all.
//
// WriteFile puts the bytes in a temporary file in the destination's
// directory, syncs it, renames it over the destination and syncs the
// directory, so that a reader sees either the previous file or the complete
// new one, and a crash at any instant never leaves a partial file under the
// destination name. The temporary file is named "." + base name + ".tmp-" +
// a random suffix; it is removed when the write fails.
package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// WriteFile writes the concatenation of parts to path, replacing any file
// there, with permission bits perm exactly (not masked by the umask). The
// directory of path must exist. On error path is left as it was.
func WriteFile(path string, perm fs.FileMode, parts ...[]byte) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	for _, p := range parts {
		if _, err = f.Write(p); err != nil {
			return err
		}
	}
	if err = f.Chmod(perm); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}
