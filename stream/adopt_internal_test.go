package stream

import (
	"context"
	"testing"
)

// TestAdoptReplacesIdleShard plays two readers of one shard table (the
// agent's training-process iteration and a DataLoader worker's share one)
// acquiring the same shard at once under a cache limit: reader X takes the
// shard from the idle list and leases it again while reader Y opens it,
// reads and releases it, so that it is idle in the table (holding no
// lease) when X puts its own in. X must read under a lease: the shard it
// got was leased by no one, and the cache evicted it while read.
func TestAdoptReplacesIdleShard(t *testing.T) {
	d := idleDataset(t, "limited")
	ctx := context.Background()
	tb := d.table
	const shard = 3
	o, _, err := tb.acquire(ctx, shard, false)
	if err != nil {
		t.Fatal(err)
	}
	tb.release(o) // idle
	// X: takes it from the idle list (acquire's first step)...
	tb.mu.Lock()
	x := tb.m[shard]
	if x == nil || x.refs != 0 {
		tb.mu.Unlock()
		t.Fatal("the released shard is not idle in the table")
	}
	tb.unlinkIdle(x)
	delete(tb.m, shard)
	tb.mu.Unlock()
	// ...Y opens it anew and releases it: idle again, without a lease...
	y, _, err := tb.acquire(ctx, shard, false)
	if err != nil {
		t.Fatal(err)
	}
	if y == x {
		t.Fatal("Y got X's shard")
	}
	tb.release(y)
	// ...and X, leased again, puts its shard in.
	x, _, err = d.reopen(ctx, x, false)
	if err != nil {
		t.Fatal(err)
	}
	got := tb.adopt(x)
	defer tb.release(got)
	if got.lease == nil {
		t.Fatal("X reads a shard with no lease: the cache may evict it")
	}
}
