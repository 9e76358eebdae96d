package cache

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestWriteFileBehindAfterFirstDownload: in a cache without a limit, an
// index written behind takes nothing on its caller's path, neither its
// reservation nor its temporary file, until the Cache's first download
// has begun; then it is written, and the shard's commit still follows
// it. With no download it is written all the same, behindDelay later.
func TestWriteFileBehindAfterFirstDownload(t *testing.T) {
	ctx := context.Background()
	data := bytes.Repeat([]byte("sluice-first-"), 3000)
	mb := memWith(t, data, "ds/a.mds")
	dir := t.TempDir()
	c, err := Open(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	index := []byte(`{"version": 2, "shards": []}`)
	part := filepath.Join(dir, "ds", "index.json") + partSuffix
	wait, err := c.WriteFileBehind("ds/index.json", index)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(part); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the index's temporary file was created before any download (stat: %v)", err)
	}
	if u, err := c.Usage(ctx); err != nil || u != 0 {
		t.Fatalf("usage %d (%v) before any download, want 0: nothing reserved yet", u, err)
	}
	d, err := c.Add(ctx, &Source{Bucket: mb, Backoff: func(int) time.Duration { return time.Millisecond },
		Shards: []Shard{{Files: []File{{Raw: "ds/a.mds", RawBytes: int64(len(data))}}}}})
	if err != nil {
		t.Fatal(err)
	}
	lctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	l, err := d.Acquire(lctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "ds", "index.json"))
	if err != nil || !bytes.Equal(got, index) {
		t.Fatalf("index after the first download: %q (%v), want %q", got, err, index)
	}
	if !d.Present(0) {
		t.Fatal("shard not in place after its Acquire")
	}

	// A cache with no download at all: written behindDelay later.
	dir2 := t.TempDir()
	c2, err := Open(ctx, dir2, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	wait, err = c2.WriteFileBehind("ds/index.json", index)
	if err != nil {
		t.Fatal(err)
	}
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(dir2, "ds", "index.json")); err != nil || !bytes.Equal(got, index) {
		t.Fatalf("index written without a download: %q (%v), want %q", got, err, index)
	}
}
