package cache_test

import (
	"context"
	"testing"

	"github.com/sluicedata/sluice/cache"
)

// TestLocal: Local tells a shard a lease would get at once (leased, held
// idle or present) from one that needs a fetch (absent, or evicted), and
// never downloads anything itself.
func TestLocal(t *testing.T) {
	ctx := context.Background()
	const size = 4096
	c, err := cache.Open(ctx, t.TempDir(), &cache.Options{Limit: 2 * size})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	src, cb, _ := makeSource(t, 4, size, false)
	d, err := c.Add(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	for s := range 4 {
		if d.Local(s) {
			t.Fatalf("shard %d local before any fetch", s)
		}
	}
	l0, err := d.Acquire(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !d.Local(0) {
		t.Error("a leased shard is not local")
	}
	l0.Release()
	if !d.Local(0) {
		t.Error("a released shard still in the cache is not local")
	}
	// Two more shards under a limit of two: shard 0 is evicted.
	for _, s := range []int{1, 2} {
		l, err := d.Acquire(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		l.Release()
	}
	if d.Local(0) {
		t.Error("an evicted shard is local")
	}
	if !d.Local(2) {
		t.Error("the last shard fetched is not local")
	}
	if d.Local(3) || d.Local(-1) || d.Local(4) {
		t.Error("an absent or out-of-range shard is local")
	}
	if n := cb.count(src.Shards[3].Files[0].Raw); n != 0 {
		t.Errorf("Local downloaded shard 3 %d times", n)
	}
}
