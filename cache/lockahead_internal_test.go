package cache

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"testing"
	"time"
)

// TestPrepareFetch: PrepareFetch creates a missing shard's lock file in
// the background, and nothing for a shard whose files are present, one
// out of range, or after Close; the fetch that follows takes its fetch
// lock on the file as before and downloads the shard once.
func TestPrepareFetch(t *testing.T) {
	ctx := context.Background()
	data := memData()
	dir := t.TempDir()
	mb := memWith(t, data, "a.mds", "b.mds")
	c, err := Open(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	d, err := c.Add(ctx, &Source{Bucket: mb, Backoff: func(int) time.Duration { return time.Millisecond },
		Shards: []Shard{
			{Files: []File{{Raw: "a.mds", RawBytes: int64(len(data))}}},
			{Files: []File{{Raw: "b.mds", RawBytes: int64(len(data))}}},
		}})
	if err != nil {
		t.Fatal(err)
	}
	// Shard 1 present (copied in by hand): no lock file made for it.
	if err := os.WriteFile(d.path("b.mds"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	d.PrepareFetch(-1)
	d.PrepareFetch(2)
	d.PrepareFetch(1)
	d.PrepareFetch(0)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(d.lockPath(0)); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("shard 0's lock file not created in 30 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The requests are handled in order: shard 1's came first.
	if _, err := os.Stat(d.lockPath(1)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a lock file was made for a present shard (stat: %v)", err)
	}
	l, err := d.Acquire(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	if got, err := os.ReadFile(d.path("a.mds")); err != nil || len(got) != len(data) {
		t.Fatalf("shard 0: %d bytes (%v), want %d", len(got), err, len(data))
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	d.PrepareFetch(0) // after Close: nothing, and no panic
}
