package stream_test

import (
	"context"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/plan"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/stream"
)

// heldShards is a bucket whose shard GETs after the first wait until
// release is closed; it counts the shard GETs asked for.
type heldShards struct {
	storage.Bucket
	release chan struct{}
	mu      sync.Mutex
	gets    int
}

func (h *heldShards) NewRangeReader(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if key != format.IndexFile {
		h.mu.Lock()
		h.gets++
		first := h.gets == 1
		h.mu.Unlock()
		if !first {
			select {
			case <-h.release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	}
	return h.Bucket.NewRangeReader(ctx, key, off, n)
}

func (h *heldShards) shardGETs() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.gets
}

// TestLockFilesCreatedAhead: once the first sample is out, the prefetch
// walk has the cache create the fetch lock files of the shards that follow
// the ones it fetches (as many as its fetch slots) before their fetches
// start, so that a fetch started when a slot frees opens a file that
// exists instead of creating an inode on its way to its GET. Nothing else
// changes: those shards are not fetched before a slot frees, and every
// shard is fetched once. Before, a shard's lock file was created by its
// fetch alone: the cache held 3 lock files here (the first shard's and the
// two held fetches').
func TestLockFilesCreatedAhead(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	reg, cb := memDataset(t, spec{samples: 200, payload: 1000, sizeLimit: 8 << 10})
	hb := &heldShards{Bucket: cb, release: make(chan struct{})}
	reg.Register("held", func(context.Context, *url.URL) (storage.Bucket, error) { return hb, nil })
	local := t.TempDir()
	ds, err := stream.Open(ctx, &stream.Options{Remote: "held://data", Local: local, Registry: reg,
		BatchSize: 4, PrefetchConcurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	if ds.NumShards() < 8 {
		t.Fatalf("%d shards, want at least 8", ds.NumShards())
	}
	ep, err := ds.NewEpoch(ctx, plan.World{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	it, err := ep.Iter(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	released := false
	release := func() {
		if !released {
			released = true
			close(hb.release)
		}
	}
	defer func() {
		release()
		it.Close()
	}()
	// The first sample, then the second (in the same shard): its Next
	// runs the walk the first one released, which starts the two fetches
	// the slots allow (held at their GETs).
	for range 2 {
		if !it.Next() {
			t.Fatal(it.Err())
		}
	}
	locks := filepath.Join(local, ".sluice", "locks")
	count := func() int {
		ents, err := os.ReadDir(locks)
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	deadline := time.Now().Add(30 * time.Second)
	for hb.shardGETs() < 3 || count() < 5 {
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s: %d lock files with %d shard GETs asked for, want 5 (3 fetched, 2 ahead) with 3",
				count(), hb.shardGETs())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if g := hb.shardGETs(); g != 3 {
		t.Fatalf("%d shard GETs while two are held, want 3: a shard named ahead was fetched", g)
	}
	if n := count(); n != 5 {
		t.Fatalf("%d lock files, want 5: 3 fetched and the 2 next ahead (as many as the slots)", n)
	}
	release()
	n := int64(2)
	for it.Next() {
		n++
	}
	if err := it.Err(); err != nil || n != 200 {
		t.Fatalf("%d samples (%v), want 200", n, err)
	}
	for k, v := range cb.counts() {
		if strings.HasPrefix(k, "shard.") && v != 1 {
			t.Fatalf("%s fetched %d times, want once", k, v)
		}
	}
}
