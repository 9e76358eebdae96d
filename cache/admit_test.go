package cache_test

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicedata/sluice/cache"
	"github.com/sluicedata/sluice/storage"
)

// gatedBucket holds every read until gate is closed.
type gatedBucket struct {
	storage.Bucket
	gate chan struct{}
}

func (b *gatedBucket) NewRangeReader(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	select {
	case <-b.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return b.Bucket.NewRangeReader(ctx, key, off, n)
}

// TestPrefetchAdmittedWhenAsked checks that a prefetch is admitted or
// refused for room before Prefetch returns, in the order of the calls:
// its bytes are reserved (Usage counts them) while its download has not
// begun, and a prefetch with no room left (everything else in flight) is
// refused at once, its callback run before PrefetchFunc returns. Before,
// a prefetch reserved on its flight's goroutine, after taking the shard's
// lock, so a walk that named several shards saw the refusals late and in
// an order the goroutines raced to (a validation run of one setting
// fetched 52, 53 or 54 times).
func TestPrefetchAdmittedWhenAsked(t *testing.T) {
	ctx := context.Background()
	const size = 4096
	c, err := cache.Open(ctx, t.TempDir(), &cache.Options{Limit: 2 * size, WaitTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	src, _, _ := makeSource(t, 3, size, false)
	gb := &gatedBucket{Bucket: src.Bucket, gate: make(chan struct{})}
	src.Bucket = gb
	d, err := c.Add(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	v := d.Via(nil)
	results := make(chan error, 3)
	for shard := range 2 {
		var called atomic.Bool
		v.PrefetchFunc(shard, int64(shard+1), func(err error) { called.Store(true); results <- err })
		if called.Load() {
			t.Fatalf("prefetch of shard %d ended before its download began", shard)
		}
		u, err := c.Usage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if want := int64(shard+1) * size; u != want {
			t.Fatalf("usage after the prefetch of shard %d returned: %d bytes, want %d (reserved when asked)", shard, u, want)
		}
	}
	var refused error
	called := false
	v.PrefetchFunc(2, 3, func(err error) { called, refused = true, err })
	if !called || !errors.Is(refused, cache.ErrNoSpace) {
		t.Fatalf("prefetch with no room: called %v, err %v before PrefetchFunc returned; want ErrNoSpace at once", called, refused)
	}
	close(gb.gate)
	for range 2 {
		select {
		case err := <-results:
			if err != nil {
				t.Fatalf("admitted prefetch: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("admitted prefetches did not end")
		}
	}
	for shard := range 2 {
		// Its lease waits for the fetch's commit.
		l, err := d.Acquire(ctx, shard)
		if err != nil {
			t.Fatal(err)
		}
		l.Release()
		if !d.Present(shard) {
			t.Errorf("shard %d not present after its prefetch", shard)
		}
	}
	if d.Present(2) || d.Coming(2) {
		t.Error("the refused shard is in the cache")
	}
}
