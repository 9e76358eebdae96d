// Package dirsnap measures the bytes a directory tree holds at one
// instant, for tests that check a cache's limit while it runs.
//
// A plain walk stats files one after another, so the files it counts need
// not have existed together: a shard stat'ed in one dataset directory and
// evicted a moment later, and the file fetched in its place in a directory
// walked afterwards, are both counted although the directory never held
// them at once. Bytes pins every file it sees (an open descriptor keeps its
// inode from being reused) and, once the whole walk is done, checks that
// each is still linked where it was. A file linked at the same place before
// and after the instant the walk ended was linked at that instant, so the
// sum is a lower bound of what the tree held then: it never counts bytes
// that did not coexist, and it misses only files created during the walk
// or deleted before its end.
package dirsnap

import (
	"io/fs"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// pinned is a file seen by the walk: its path, inode and size then.
type pinned struct {
	path string
	fd   int
	dev  uint64
	ino  uint64
	size int64
}

// Bytes returns the bytes of the regular files under dir that all existed
// together at one instant, skipping every directory named skip (the
// cache's metadata; "" skips none). A file whose name ends in
// partSuffix and that was renamed to the name without it meanwhile counts
// once, under either name: the rename is atomic.
func Bytes(dir, skip, partSuffix string) int64 {
	return measure(dir, skip, partSuffix, nil)
}

// measure is Bytes with a hook run between the walk and the check.
func measure(dir, skip, partSuffix string, between func()) int64 {
	var files []pinned
	defer func() {
		for _, f := range files {
			unix.Close(f.fd)
		}
	}()
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() && skip != "" && d.Name() == skip && p != dir {
			return filepath.SkipDir
		}
		if !d.Type().IsRegular() {
			return nil
		}
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil // gone already
		}
		var st unix.Stat_t
		if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
			unix.Close(fd)
			return nil
		}
		files = append(files, pinned{path: p, fd: fd, dev: uint64(st.Dev), ino: uint64(st.Ino), size: st.Size})
		return nil
	})
	if between != nil {
		between()
	}
	var n int64
	for _, f := range files {
		if !linked(f, f.path) && !(partSuffix != "" && strings.HasSuffix(f.path, partSuffix) &&
			linked(f, strings.TrimSuffix(f.path, partSuffix))) {
			continue // deleted (or replaced) before the walk ended, maybe
		}
		var st unix.Stat_t
		if unix.Fstat(f.fd, &st) != nil {
			continue
		}
		n += min(f.size, st.Size) // what it held at both ends
	}
	return n
}

// linked reports whether path names f's inode now.
func linked(f pinned, path string) bool {
	var st unix.Stat_t
	if unix.Lstat(path, &st) != nil {
		return false
	}
	return uint64(st.Dev) == f.dev && uint64(st.Ino) == f.ino
}
