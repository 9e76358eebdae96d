package cache_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicedata/sluice/cache"
)

// pinningFuture is a consumer that will use shards at the given distances
// and pins some of them (cache.Pinner).
type pinningFuture struct {
	d     *cache.Dataset
	dist  map[int]int64
	pins  []int
	calls int
}

func (f *pinningFuture) NextUses(fn func(d *cache.Dataset, shard int, distance int64)) {
	for s, n := range f.dist {
		fn(f.d, s, n)
	}
}

func (f *pinningFuture) Pinned(fn func(d *cache.Dataset, shard int)) {
	f.calls++
	for _, s := range f.pins {
		fn(f.d, s)
	}
}

// TestPinnedShardNotEvicted checks that a shard a Future pins (a worker
// taking turns holds the shards its walk fetched until its turn leases
// them) is no eviction candidate, even where the policy would pick it
// first (the farthest next use), and that it is one again once unpinned.
func TestPinnedShardNotEvicted(t *testing.T) {
	ctx := context.Background()
	const size = 4096
	c, err := cache.Open(ctx, t.TempDir(), &cache.Options{Limit: 2 * size, WaitTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	src, _, _ := makeSource(t, 4, size, false)
	d, err := c.Add(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	for s := range 2 {
		l, err := d.Acquire(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		l.Release()
	}
	// Shard 0 is needed last: Belady's rule evicts it first, unless it
	// is pinned.
	f := &pinningFuture{d: d, dist: map[int]int64{0: 100, 1: 5, 2: 0, 3: 1}, pins: []int{0}}
	defer c.AddFuture(f)()
	l, err := d.Acquire(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	if f.calls == 0 {
		t.Fatal("the eviction did not ask the Future for its pins")
	}
	if !d.Present(0) || d.Present(1) {
		t.Fatalf("after a demand fetch that evicts one shard: shard 0 (pinned, farthest) present %v, shard 1 present %v; want the pinned shard kept and shard 1 evicted",
			d.Present(0), d.Present(1))
	}
	// Unpinned, shard 0 is the farthest again.
	f.pins = nil
	f.dist = map[int]int64{0: 100, 2: 5, 3: 0}
	l, err = d.Acquire(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	if d.Present(0) || !d.Present(2) {
		t.Fatalf("unpinned: shard 0 present %v, shard 2 present %v; want shard 0 (farthest) evicted", d.Present(0), d.Present(2))
	}
}
