package stream_test

import (
	"context"
	"errors"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicedata/sluice/cache"
	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/plan"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/stream"
)

// gatedStat holds every Stat of index.json until gate is closed (or the
// caller's context ends): the store's answer about the index, which Open
// asks for in the background when the GET's response did not tell it,
// comes when the test says.
type gatedStat struct {
	*countingBucket
	gate <-chan struct{}
}

func (b *gatedStat) Stat(ctx context.Context, key string) (storage.ObjectInfo, error) {
	if key == format.IndexFile {
		select {
		case <-b.gate:
		case <-ctx.Done():
			return storage.ObjectInfo{}, ctx.Err()
		}
	}
	return b.countingBucket.Stat(ctx, key)
}

// TestCloseDoesNotWaitForETagRoom: under the smallest cache limit (the
// index and two shards), with both shards leased by Locations (which stay
// valid after Close), the index's ETag file that Open records in the
// background finds no room. Close must not wait for that room: it waited
// for the write's minute before. The cache is consistent afterwards: no
// temporary file is left, and a reopen under the same limit reads the
// whole epoch.
func TestCloseDoesNotWaitForETagRoom(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// 20 samples of 1000 bytes, 3 per shard: the first two shards are
	// of the largest size.
	_, cb := memDataset(t, spec{samples: 20, payload: 1000, sizeLimit: 4000})
	gate := make(chan struct{})
	gb := &gatedStat{countingBucket: cb, gate: gate}
	reg := &storage.Registry{}
	reg.Register("mem", func(context.Context, *url.URL) (storage.Bucket, error) { return gb, nil })
	close(gate) // the first Open only learns the smallest limit
	_, err := stream.Open(ctx, &stream.Options{Remote: "mem://data", Local: t.TempDir(), Registry: reg, CacheLimit: 1})
	var le *cache.LimitError
	if !errors.As(err, &le) {
		t.Fatalf("Open with a 1-byte limit = %v, want a LimitError", err)
	}
	g := make(chan struct{})
	gb.gate = g
	local := t.TempDir()
	opts := &stream.Options{Remote: "mem://data", Local: local, Registry: reg, CacheLimit: le.Min, BatchSize: 2,
		WaitTimeout: 10 * time.Minute}
	ds, err := stream.Open(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	for k := range ds.NumShards() {
		if ds.ShardBytes(k) > ds.ShardBytes(0) || ds.ShardBytes(1) != ds.ShardBytes(0) {
			t.Fatalf("shard %d has %d bytes, shards 0 and 1 %d and %d: want the first two of the largest size",
				k, ds.ShardBytes(k), ds.ShardBytes(0), ds.ShardBytes(1))
		}
	}
	ep, err := ds.NewEpoch(ctx, plan.World{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	it, err := ep.Iter(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	var locs []*stream.Location
	release := func() {
		for _, l := range locs {
			l.Release()
		}
		locs = nil
	}
	defer release()
	held := map[int]bool{}
	for len(held) < 2 && it.Next() {
		if s, _ := it.Shard(); !held[s] {
			l, err := it.Location()
			if err != nil {
				t.Fatal(err)
			}
			held[s] = true
			locs = append(locs, l)
		}
	}
	if err := it.Err(); err != nil || len(held) != 2 {
		t.Fatalf("leased %d shards (%v), want 2", len(held), err)
	}
	it.Close()
	// The index and both shards fill the limit: the ETag's write, which
	// starts now, finds no room until a Location is released.
	close(g)
	closed := make(chan error, 1)
	go func() { closed <- ds.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		release() // lets the old code's Close end
		<-closed
		t.Fatal("Close waited for room for the index's ETag file while both shards were leased")
	}
	release()
	// The write found no room (it is left out), nothing is left half
	// written, and the cache works under its limit.
	if tags := findETagFiles(t, local); len(tags) != 0 {
		t.Errorf("ETag files %q, want none (there was no room for one)", tags)
	}
	ds, err = stream.Open(ctx, opts)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer ds.Close()
	ep, err = ds.NewEpoch(ctx, plan.World{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	it, err = ep.Iter(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var n, sum int64
	for it.Next() {
		n++
		sum += it.ID()
	}
	if err := it.Err(); err != nil || n != 20 || sum != 190 {
		t.Fatalf("reopened epoch: %d samples, id sum %d, err %v; want 20, 190", n, sum, err)
	}
}

// TestCloseKeepsETagWithRoom: a Close right after a cold Open still
// records the index's ETag when there is room for it (Close stops only
// the wait for room).
func TestCloseKeepsETagWithRoom(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reg, cb := memDataset(t, spec{samples: 20, payload: 1000, sizeLimit: 4000})
	info, err := cb.Stat(ctx, format.IndexFile)
	if err != nil || info.ETag == "" {
		t.Fatalf("the store gives no ETag (%v): nothing to test", err)
	}
	local := t.TempDir()
	ds, err := stream.Open(ctx, &stream.Options{Remote: "mem://data", Local: local, Registry: reg, CacheLimit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if err := ds.Close(); err != nil {
		t.Fatal(err)
	}
	tags := findETagFiles(t, local)
	if len(tags) != 1 {
		t.Fatalf("ETag files %q, want one", tags)
	}
	if b, err := os.ReadFile(tags[0]); err != nil || string(b) != info.ETag {
		t.Fatalf("%s holds %q (%v), want the store's ETag %q", tags[0], b, err, info.ETag)
	}
}

// findETagFiles returns the files under dir whose names begin with the
// cached index's ETag file's name (the file itself, or a temporary one).
func findETagFiles(t *testing.T, dir string) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasPrefix(d.Name(), format.IndexFile+".etag") {
			found = append(found, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}
