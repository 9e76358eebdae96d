package stream

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/mds"
	"github.com/sluicedata/sluice/plan"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/memstore"
)

// TestWalkDoesNotWaitWithoutLimit: without a cache limit, a consumer whose
// move starts a prefetch walk while another walk is in progress (on a
// fetch's goroutine, admitting the fetches its end freed slots for) does
// not wait for it: Next returns its sample and leaves the walk from the
// new position to the walk in progress, which walks once more. Before,
// Next waited for the other walk's admissions (~1 ms each on a loaded
// machine) before handing over the sample.
func TestWalkDoesNotWaitWithoutLimit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	w, err := mds.NewWriter(dir, &mds.WriterOptions{Columns: map[string]string{"id": "int", "data": "bytes"}, SizeLimit: 8 << 10})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		if err := w.Write(format.Sample{"id": int64(i), "data": make([]byte, 1000)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	mb := memstore.New("data")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		wr, err := mb.NewWriter(ctx, e.Name(), nil)
		if err != nil {
			t.Fatal(err)
		}
		wr.Write(b)
		if err := wr.Close(); err != nil {
			t.Fatal(err)
		}
	}
	reg := &storage.Registry{}
	reg.Register("mem", func(context.Context, *url.URL) (storage.Bucket, error) { return mb, nil })
	ds, err := Open(ctx, &Options{Remote: "mem://data", Local: t.TempDir(), Registry: reg, BatchSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	if ds.NumShards() < 3 {
		t.Fatalf("%d shards, want at least 3", ds.NumShards())
	}
	ep, err := ds.NewEpoch(ctx, plan.World{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	it, err := ep.Iter(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	if !it.Next() {
		t.Fatal(it.Err())
	}
	// The first sample is out: the next Next runs the walk it released
	// (walkOut). Another walk holds the walk's lock meanwhile.
	it.pf.mu.Lock()
	next := make(chan bool, 1)
	go func() { next <- it.Next() }()
	select {
	case ok := <-next:
		it.pf.mu.Unlock()
		if !ok {
			t.Fatal(it.Err())
		}
	case <-time.After(30 * time.Second):
		it.pf.mu.Unlock()
		<-next
		t.Fatal("Next waited for a prefetch walk in progress on another goroutine")
	}
	if !it.pf.again.Load() {
		t.Fatal("the walk from the consumer's position was not left to the walk in progress")
	}
	// The walk in progress walks once more (its kick loop) and the epoch
	// ends with every sample.
	it.pf.kick()
	n := int64(2)
	for it.Next() {
		n++
	}
	if err := it.Err(); err != nil || n != 40 {
		t.Fatalf("%d samples (%v), want 40", n, err)
	}
}
