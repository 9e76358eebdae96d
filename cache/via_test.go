package cache_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"testing"

	"github.com/sluicedata/sluice/cache"
	"github.com/sluicedata/sluice/storage"
)

// deniedBucket refuses every read, as a store does for wrong credentials.
type deniedBucket struct{ storage.Bucket }

func (deniedBucket) NewRangeReader(context.Context, string, int64, int64) (io.ReadCloser, error) {
	return nil, storage.ErrPermission
}

// TestViaDownloadsThroughItsOwnStore: one directory registered by a first
// store; a view on a second store downloads the shards it needs through
// that second store, and a view whose store refuses the job gets the
// refusal instead of a download through the registering store.
func TestViaDownloadsThroughItsOwnStore(t *testing.T) {
	ctx := context.Background()
	c, err := cache.Open(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	src, first, datas := makeSource(t, 4, 5000, false)
	d, err := c.Add(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	second := &countingBucket{Bucket: first.Bucket, gets: map[string]int{}}
	v := d.Via(second)

	l, err := v.Acquire(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(l.Path(0))
	l.Release()
	if err != nil || !bytes.Equal(got, datas[0]) {
		t.Fatalf("shard 0 through the view: %v", err)
	}
	done, errf := v.Prefetch(1, 1)
	<-done
	if err := errf(); err != nil {
		t.Fatal(err)
	}
	for _, s := range []int{0, 1} {
		key := src.Shards[s].Files[0].Raw
		if n, m := second.count(key), first.count(key); n != 1 || m != 0 {
			t.Errorf("shard %d: %d reads through the view's store, %d through the registering store; want 1, 0", s, n, m)
		}
	}

	// A store that refuses: its fetch fails, the registering store is not used.
	_, err = d.Via(deniedBucket{first.Bucket}).Acquire(ctx, 2)
	if !errors.Is(err, storage.ErrPermission) {
		t.Fatalf("acquire through a refusing store: %v, want ErrPermission", err)
	}
	if n := first.count(src.Shards[2].Files[0].Raw); n != 0 {
		t.Errorf("shard 2 read %d times through the registering store", n)
	}
	// Without a view, the registering store.
	l, err = d.Acquire(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	if n := first.count(src.Shards[3].Files[0].Raw); n != 1 {
		t.Errorf("shard 3: %d reads through the registering store, want 1", n)
	}
	if _, errf := d.Via(second).Prefetch(9, 1); errf() == nil {
		t.Error("prefetch of shard 9 of 4 through a view: no error")
	}
}
