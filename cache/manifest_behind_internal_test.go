package cache

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestManifestWrittenBehind: Add returns while its dataset's manifest is
// still being written (held here), a shard is downloaded and read early
// meanwhile, but it is renamed into place only after the manifest is; a
// manifest whose write fails holds every commit of the dataset (no shard
// in place that other processes could not evict), and the next Add of
// the dataset writes it again and lets them through.
func TestManifestWrittenBehind(t *testing.T) {
	ctx := context.Background()
	data := bytes.Repeat([]byte("sluice-manifest-"), 3000)
	mb := memWith(t, data, "a.mds", "b.mds")
	dir := t.TempDir()
	c, err := Open(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	src := func() *Source {
		return &Source{Dir: "ds", Bucket: mb, Backoff: func(int) time.Duration { return time.Millisecond },
			Shards: []Shard{{Files: []File{{Raw: "a.mds", RawBytes: int64(len(data))}}},
				{Files: []File{{Raw: "b.mds", RawBytes: int64(len(data))}}}}}
	}
	hold := make(chan struct{})
	c.behind.manifestHold = hold
	var once sync.Once
	release := func() { once.Do(func() { close(hold) }) }
	defer release() // before Close, which waits for the write
	d, err := c.Add(ctx, src())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(d.manifestPath()); err == nil {
		t.Fatal("manifest in place before its write was let go")
	}
	lctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	l, err := d.AcquireEarly(lctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(l.ReadPath(0))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("early read of %s: %d bytes, %v; want the %d downloaded", l.ReadPath(0), len(got), err, len(data))
	}
	// Give the fetch time to reach its commit: it must wait there.
	time.Sleep(50 * time.Millisecond)
	if d.Present(0) {
		t.Fatal("shard renamed into place before its dataset's manifest")
	}
	release()
	if err := l.Committed(lctx); err != nil {
		t.Fatalf("commit after the manifest's write: %v", err)
	}
	l.Release()
	if !d.Present(0) || !d.manifestCurrent() {
		t.Fatalf("after the manifest's write: shard in place %v, manifest current %v", d.Present(0), d.manifestCurrent())
	}

	// A second dataset whose manifest cannot be written (the manifests'
	// directory is a file): its shards are downloaded, never committed.
	c2dir := t.TempDir()
	c2, err := Open(ctx, c2dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	mdir := filepath.Join(c2dir, metaDir, manifestDir)
	if err := os.RemoveAll(mdir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mdir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	d2, err := c2.Add(ctx, src())
	if err != nil {
		t.Fatalf("Add: %v (the manifest's failure shows at the commits)", err)
	}
	if _, err := d2.Acquire(lctx, 0); err == nil {
		t.Fatal("shard committed although its manifest's write failed")
	} else if !strings.Contains(err.Error(), "waiting for the files it belongs to") {
		t.Fatalf("commit after a failed manifest: %v, want it to name the wait", err)
	}
	if d2.Present(0) {
		t.Fatal("shard in place without its manifest")
	}
	if err := os.Remove(mdir); err != nil {
		t.Fatal(err)
	}
	again, err := c2.Add(ctx, src())
	if err != nil || again != d2 {
		t.Fatalf("Add again: %v, %v (want the same dataset)", again, err)
	}
	l2, err := d2.Acquire(lctx, 0)
	if err != nil {
		t.Fatalf("shard after the manifest was written again: %v", err)
	}
	l2.Release()
	if !d2.Present(0) || !d2.manifestCurrent() {
		t.Fatalf("after Add again: shard in place %v, manifest current %v", d2.Present(0), d2.manifestCurrent())
	}
}
