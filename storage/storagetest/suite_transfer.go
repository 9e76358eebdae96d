package storagetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sluicedata/sluice/storage"
)

func (s *suite) testUpload(t *testing.T) {
	s.writable(t)
	b, _ := s.newBucket(t)
	data := Pattern(10, 3<<20+17)
	if err := storage.Upload(t.Context(), b, "up/large", bytes.NewReader(data), int64(len(data)), &storage.WriteOptions{PartSize: 5 << 20}); err != nil {
		t.Fatal(err)
	}
	if got := Get(t, b, "up/large"); !bytes.Equal(got, data) {
		t.Errorf("uploaded %d bytes, read back %d (equal: false)", len(data), len(got))
	}
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, data[:1000], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := storage.UploadFile(t.Context(), b, "up/file", path, nil); err != nil {
		t.Fatal(err)
	}
	if got := Get(t, b, "up/file"); !bytes.Equal(got, data[:1000]) {
		t.Error("UploadFile: wrong content")
	}
}

func (s *suite) testDownload(t *testing.T) {
	b, w := s.newBucket(t)
	ctx := t.Context()
	data := Pattern(11, 300_001)
	Put(t, w, "dl/obj", data)
	Put(t, w, "dl/empty", nil)
	dir := t.TempDir()
	tests := []struct {
		name string
		key  string
		opts *storage.DownloadOptions
		want []byte
	}{
		{"defaults", "dl/obj", nil, data},
		{"parallel parts", "dl/obj", &storage.DownloadOptions{PartSize: 4096, Concurrency: 8}, data},
		{"uneven parts with known size", "dl/obj", &storage.DownloadOptions{PartSize: 100_000, Size: int64(len(data))}, data},
		{"one part per byte range of one", "dl/obj", &storage.DownloadOptions{PartSize: 300_000, Concurrency: 2}, data},
		{"empty object", "dl/empty", nil, []byte{}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := filepath.Join(dir, fmt.Sprintf("out%d", i))
			var total int64
			var mu sync.Mutex
			o := storage.DownloadOptions{}
			if tt.opts != nil {
				o = *tt.opts
			}
			o.Progress = func(n int64) { mu.Lock(); total += n; mu.Unlock() }
			n, err := storage.Download(ctx, b, tt.key, dst, &o)
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(dst)
			if err != nil {
				t.Fatal(err)
			}
			if n != int64(len(tt.want)) || !bytes.Equal(got, tt.want) {
				t.Errorf("Download = %d bytes (file %d), want %d; equal %v", n, len(got), len(tt.want), bytes.Equal(got, tt.want))
			}
			if total != int64(len(tt.want)) {
				t.Errorf("progress reported %d bytes, want %d", total, len(tt.want))
			}
		})
	}
	assertNoTemp(t, dir)
}

func (s *suite) testDownloadAtomic(t *testing.T) {
	b, w := s.newBucket(t)
	ctx := t.Context()
	data := Pattern(12, 50_000)
	Put(t, w, "obj", data)
	dir := t.TempDir()
	dst := filepath.Join(dir, "dst")
	if err := os.WriteFile(dst, []byte("previous"), 0o644); err != nil {
		t.Fatal(err)
	}
	failures := []struct {
		name string
		key  string
		opts *storage.DownloadOptions
		want error
	}{
		{"missing object", "nope", nil, storage.ErrNotExist},
		{"object shorter than expected", "obj", &storage.DownloadOptions{Size: int64(len(data)) + 1}, nil},
		{"object longer than expected", "obj", &storage.DownloadOptions{Size: int64(len(data)) - 1}, nil},
		{"longer than expected, in parts", "obj", &storage.DownloadOptions{Size: 20_000, PartSize: 8192}, nil},
		{"shorter than expected, in parts", "obj", &storage.DownloadOptions{Size: 70_000, PartSize: 8192}, nil},
		{"cancelled", "obj", nil, context.Canceled},
	}
	for _, tt := range failures {
		t.Run(tt.name, func(t *testing.T) {
			ctx := ctx
			if tt.want == context.Canceled {
				c, cancel := context.WithCancel(ctx)
				cancel()
				ctx = c
			}
			if _, err := storage.Download(ctx, b, tt.key, dst, tt.opts); err == nil {
				t.Fatal("Download succeeded")
			} else if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("Download = %v, want %v", err, tt.want)
			} else if !strings.Contains(err.Error(), tt.key) {
				t.Errorf("error %q does not name the object", err)
			}
			if got, err := os.ReadFile(dst); err != nil || string(got) != "previous" {
				t.Errorf("destination changed to %q (%v) by a failed download", got, err)
			}
			assertNoTemp(t, dir)
		})
	}
	// Downloads racing to one destination leave one whole copy.
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if _, err := storage.Download(ctx, b, "obj", filepath.Join(dir, "raced"), &storage.DownloadOptions{PartSize: 8192}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got, _ := os.ReadFile(filepath.Join(dir, "raced")); !bytes.Equal(got, data) {
		t.Error("racing downloads left a mixed file")
	}
	if _, err := storage.Download(ctx, b, "obj", filepath.Join(dir, "no-such-dir", "x"), nil); err == nil {
		t.Error("Download into a missing directory succeeded")
	}
	if _, err := storage.Download(ctx, b, "obj", dst, nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(dst); !bytes.Equal(got, data) {
		t.Error("Download over an existing file: wrong content")
	}
	assertNoTemp(t, dir)
}

// assertNoTemp fails t if dir holds a temporary file of the storage helpers.
func assertNoTemp(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if storage.IsTempName(e.Name()) {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}

func (s *suite) testClose(t *testing.T) {
	b, w := s.newBucket(t)
	Put(t, w, "k", []byte("x"))
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	ctx := t.Context()
	if _, err := b.Stat(ctx, "k"); !errors.Is(err, storage.ErrClosed) {
		t.Errorf("Stat after Close = %v, want ErrClosed", err)
	}
	if r, err := b.NewRangeReader(ctx, "k", 0, -1); !errors.Is(err, storage.ErrClosed) {
		if err == nil {
			r.Close()
		}
		t.Errorf("NewRangeReader after Close = %v, want ErrClosed", err)
	}
	if !s.opts.NoList {
		if err := b.List(ctx, "", func(storage.ObjectInfo) error { return nil }); !errors.Is(err, storage.ErrClosed) {
			t.Errorf("List after Close = %v, want ErrClosed", err)
		}
	}
}
