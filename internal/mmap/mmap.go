// Package mmap maps files read-only into memory (Unix).
package mmap

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// File is a read-only memory map of a whole file. Bytes and ReadAt are safe
// for concurrent use; Close must not run concurrently with them, and slices
// from Bytes must not be used after Close.
type File struct {
	mu   sync.Mutex
	data []byte
	size int64
}

// Open maps the file at path. An empty file yields an empty map.
func Open(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := fi.Size()
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("mmap: %s is not a regular file", path)
	}
	if size == 0 {
		return &File{}, nil
	}
	if size != int64(int(size)) {
		return nil, fmt.Errorf("mmap: %s is too large to map", path)
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap: %s: %w", path, err)
	}
	return &File{data: data, size: size}, nil
}

// Bytes returns the mapped contents.
func (m *File) Bytes() []byte { return m.data }

// Len returns the file size.
func (m *File) Len() int64 { return m.size }

// ReadAt implements io.ReaderAt.
func (m *File) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("mmap: negative offset")
	}
	if off >= int64(len(m.data)) {
		return 0, io.EOF
	}
	n := copy(p, m.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// Close unmaps the file. It is idempotent.
func (m *File) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.data == nil {
		return nil
	}
	err := unix.Munmap(m.data)
	m.data = nil
	return err
}
