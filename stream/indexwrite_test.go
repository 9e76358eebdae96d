package stream_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicedata/sluice/internal/stores"
	"github.com/sluicedata/sluice/plan"
	"github.com/sluicedata/sluice/stream"
)

// TestIndexWriteFailureFailsTheEpoch: the downloaded index.json is written
// into the cache behind the first downloads, so Open does not see that
// write fail (here its temporary file's name is taken by a directory).
// Whatever the timing, reading the epoch must then end with an error
// naming index.json — either at a shard's commit or, when every shard was
// read early from its temporary file, at the end — and never end cleanly
// with nothing cached.
func TestIndexWriteFailureFailsTheEpoch(t *testing.T) {
	src := t.TempDir()
	writeDataset(t, src, spec{samples: 300, payload: 100, sizeLimit: 1500})
	for trial := range 8 {
		local := t.TempDir()
		if err := os.Mkdir(filepath.Join(local, "index.json.part"), 0o755); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		ds, err := stream.Open(ctx, &stream.Options{Remote: "file://" + src, Local: local, Registry: stores.Default(),
			Retry: fastRetry(), BatchSize: 4})
		if err != nil {
			cancel()
			if !strings.Contains(err.Error(), "index.json") {
				t.Fatalf("trial %d: open failed without naming index.json: %v", trial, err)
			}
			continue
		}
		ep, err := ds.NewEpoch(ctx, plan.World{Nodes: 1, RanksPerNode: 1}, 1)
		if err != nil {
			t.Fatal(err)
		}
		it, err := ep.RankIter(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for it.Next() {
			n++
		}
		err = it.Err()
		it.Close()
		ds.Close()
		cancel()
		if err == nil {
			t.Fatalf("trial %d: the epoch ended cleanly after %d samples although the index could not be cached", trial, n)
		}
		if !strings.Contains(err.Error(), "index.json") {
			t.Fatalf("trial %d: error does not name index.json: %v", trial, err)
		}
	}
}

// TestReconcileFailureFailsTheEpoch: the cache's pass over a restarted
// stream's files on disk runs behind the first reads, so a file it cannot
// check (here a compressed shard's name, which no read needs beside its
// decompressed copy, taken by a symbolic link to itself) fails no read. The epoch still delivers every sample, then ends with the pass's
// error naming the file, instead of ending cleanly with it unreported.
func TestReconcileFailureFailsTheEpoch(t *testing.T) {
	src := t.TempDir()
	writeDataset(t, src, spec{samples: 200, payload: 100, sizeLimit: 1500, compression: "zstd"})
	local := t.TempDir()
	read := func() (int, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		ds, err := stream.Open(ctx, &stream.Options{Remote: "file://" + src, Local: local, Registry: stores.Default(),
			Retry: fastRetry(), BatchSize: 4})
		if err != nil {
			t.Fatal(err)
		}
		defer ds.Close()
		ep, err := ds.NewEpoch(ctx, plan.World{Nodes: 1, RanksPerNode: 1}, 1)
		if err != nil {
			t.Fatal(err)
		}
		it, err := ep.RankIter(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		n := 0
		for it.Next() {
			n++
		}
		return n, it.Err()
	}
	if n, err := read(); err != nil || n != 200 {
		t.Fatalf("first epoch: %d samples, %v", n, err)
	}
	zips, err := filepath.Glob(filepath.Join(local, "*.zstd"))
	if err != nil || len(zips) != 0 {
		t.Fatalf("compressed files kept after the first epoch: %v %v", zips, err)
	}
	raws, err := filepath.Glob(filepath.Join(local, "shard.*.mds"))
	if err != nil || len(raws) == 0 {
		t.Fatalf("no decompressed shards cached: %v %v", raws, err)
	}
	blocker := raws[0] + ".zstd"
	if err := os.Symlink(filepath.Base(blocker), blocker); err != nil {
		t.Fatal(err)
	}
	n, err := read()
	if n != 200 {
		t.Fatalf("second epoch: %d samples of 200 (%v)", n, err)
	}
	if err == nil {
		t.Fatalf("the epoch ended cleanly although the cache could not check %s", blocker)
	}
	if !strings.Contains(err.Error(), filepath.Base(blocker)) {
		t.Fatalf("error does not name %s: %v", filepath.Base(blocker), err)
	}
}
