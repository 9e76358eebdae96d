package cache_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicedata/sluice/cache"
)

// TestEvictionLeavesAbsentShardsAlone: choosing victims passes over the
// shards that were never fetched (no consumer plans them, so the policy
// offers them first) without creating their lock files or locking them:
// reading 6 shards of 400 in turn through a cache of 2 leaves lock files
// for those 6 alone. It used to create one for every shard the policy
// offered, 400 at the first eviction, and take its lock, on every
// eviction.
func TestEvictionLeavesAbsentShardsAlone(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	const size, n = 4096, 400
	c, err := cache.Open(ctx, dir, &cache.Options{Limit: 2*size + size/2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	src, _, _ := makeSource(t, n, size, false)
	d, err := c.Add(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	for s := range 6 {
		l, err := d.Acquire(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		l.Release()
	}
	if c.Stats().Evictions < 3 {
		t.Fatalf("%d evictions, want at least 3", c.Stats().Evictions)
	}
	locks, err := os.ReadDir(filepath.Join(dir, ".sluice", "locks"))
	if err != nil {
		t.Fatal(err)
	}
	if len(locks) > 6 {
		t.Errorf("%d lock files after reading 6 shards of %d", len(locks), n)
	}
}

// BenchmarkEvictManyShards measures a demand read through a cache that
// holds a few shards of a dataset of many (20,000 shards of 1 KB, a
// limit of 4): every read evicts, and the policy offers every shard never
// fetched first. Each iteration reads the next shard in turn.
func BenchmarkEvictManyShards(b *testing.B) {
	ctx := context.Background()
	const size, n = 1024, 20_000
	c, err := cache.Open(ctx, b.TempDir(), &cache.Options{Limit: 4*size + size/2})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	src, _, _ := makeSource(b, n, size, false)
	d, err := c.Add(ctx, src)
	if err != nil {
		b.Fatal(err)
	}
	s := 0
	for b.Loop() {
		l, err := d.Acquire(ctx, s%n)
		if err != nil {
			b.Fatal(err)
		}
		l.Release()
		s++
	}
}
