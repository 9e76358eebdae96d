package cache

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// The directory scans of opening a cache and registering a dataset
// (recount, reconcile) stat every file by name relative to an open
// directory (fstatat) and read directories unsorted: a 40k-shard dataset
// costs one getdents pass and one fstatat per file, without a joined
// path, a kernel walk of the full path or a sort per file.

// readDirBatch is how many entries a directory scan reads at once.
const readDirBatch = 1024

// statAt returns the size of name, relative to the open directory dir
// (symbolic links followed when follow is set). A missing file (ENOENT)
// reports ok false and no error; other errors are *fs.PathError naming
// the file under path.
func statAt(dir *os.File, path, name string, follow bool) (size int64, ok bool, err error) {
	flags := 0
	if !follow {
		flags = unix.AT_SYMLINK_NOFOLLOW
	}
	var st unix.Stat_t
	for {
		err = unix.Fstatat(int(dir.Fd()), name, &st, flags)
		if err != unix.EINTR {
			break
		}
	}
	switch {
	case err == nil:
		return st.Size, true, nil
	case errors.Is(err, unix.ENOENT):
		return 0, false, nil
	default:
		return 0, false, &fs.PathError{Op: "stat", Path: filepath.Join(path, name), Err: err}
	}
}

// sumDir returns the total size of the regular files under path, except
// the cache's metadata directory when root is set. A temporary file whose
// writer is gone is deleted (and not counted); one still locked counts at
// its size. Files or directories that vanish during the scan are skipped.
func sumDir(path string, root bool) (int64, error) {
	total, _, err := scanDir(path, root, "", nil)
	return total, err
}

// topFile is a file directly in a scanned directory: its size (of its
// target, for a symbolic link).
type topFile struct {
	size int64
}

// scanDir is sumDir that does not enter the directory skip (a path under
// path; "" for none) and, with top set, records there the files directly
// in path: regular files at their size and symbolic links at their
// target's (links are not summed; a link to nothing is not recorded).
func scanDir(path string, root bool, skip string, top map[string]topFile) (int64, map[string]topFile, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, top, nil
	}
	if err != nil {
		return 0, top, err
	}
	defer f.Close()
	var total int64
	for {
		ents, err := f.ReadDir(readDirBatch)
		for _, e := range ents {
			name, t := e.Name(), e.Type()
			if t.IsDir() {
				if root && name == metaDir {
					continue
				}
				sub := filepath.Join(path, name)
				if sub == skip {
					continue
				}
				n, _, err := scanDir(sub, false, skip, nil)
				if err != nil {
					return 0, top, err
				}
				total += n
				continue
			}
			if top != nil && t&fs.ModeSymlink != 0 {
				n, ok, err := statAt(f, path, name, true)
				if err != nil {
					return 0, top, err
				}
				if ok {
					top[name] = topFile{size: n}
				}
				continue
			}
			if !t.IsRegular() {
				continue
			}
			if strings.HasSuffix(name, partSuffix) {
				stale, err := removeIfStale(filepath.Join(path, name))
				if err != nil {
					return 0, top, err
				}
				if stale {
					continue
				}
			}
			n, ok, err := statAt(f, path, name, false)
			if err != nil {
				return 0, top, err
			}
			if ok {
				total += n
				if top != nil {
					top[name] = topFile{size: n}
				}
			}
		}
		if err == io.EOF {
			return total, top, nil
		}
		if errors.Is(err, fs.ErrNotExist) {
			return total, top, nil
		}
		if err != nil {
			return 0, top, fmt.Errorf("read directory %s: %w", path, err)
		}
		if len(ents) == 0 {
			return total, top, nil
		}
	}
}
