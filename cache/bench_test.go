package cache_test

import (
	"context"
	"testing"

	"github.com/sluicedata/sluice/cache"
)

// BenchmarkAcquireHit measures leasing a local shard: "shared" while
// another lease on it is held in the process (a reference count), "cold"
// when the lease opens and locks the file.
func BenchmarkAcquireHit(b *testing.B) {
	ctx := context.Background()
	c, err := cache.Open(ctx, b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	src, _, _ := makeSource(b, 1, 4096, false)
	d, err := c.Add(ctx, src)
	if err != nil {
		b.Fatal(err)
	}
	first, err := d.Acquire(ctx, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("shared", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			l, err := d.Acquire(ctx, 0)
			if err != nil {
				b.Fatal(err)
			}
			l.Release()
		}
	})
	first.Release()
	b.Run("cold", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			l, err := d.Acquire(ctx, 0)
			if err != nil {
				b.Fatal(err)
			}
			l.Release()
		}
	})
}
