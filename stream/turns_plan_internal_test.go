package stream

import (
	"context"
	"io"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/mds"
	"github.com/sluicedata/sluice/plan"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/memstore"
)

// getCounter counts the GETs of whole objects per key, each answered
// after latency.
type getCounter struct {
	storage.Bucket
	latency time.Duration
	mu      sync.Mutex
	gets    map[string]int
}

func (b *getCounter) NewRangeReader(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if off == 0 {
		b.mu.Lock()
		b.gets[key]++
		b.mu.Unlock()
	}
	select {
	case <-time.After(b.latency):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return b.Bucket.NewRangeReader(ctx, key, off, n)
}

// Close leaves the shared bucket open: every run of a test gets it.
func (b *getCounter) Close() error { return nil }

// lazyPlanStore uploads samples × payload bytes in shards of at most
// sizeLimit to a memstore.
func lazyPlanStore(t *testing.T, samples, payload int, sizeLimit int64) storage.Bucket {
	t.Helper()
	dir := t.TempDir()
	w, err := mds.NewWriter(dir, &mds.WriterOptions{Columns: map[string]string{"id": "int", "data": "bytes"}, SizeLimit: sizeLimit})
	if err != nil {
		t.Fatal(err)
	}
	for i := range samples {
		if err := w.Write(format.Sample{"id": int64(i), "data": make([]byte, payload)}); err != nil {
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
		wr, err := mb.NewWriter(context.Background(), e.Name(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := wr.Write(b); err != nil {
			t.Fatal(err)
		}
		if err := wr.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return mb
}

// openCounted opens the validation's setting over mb, its GETs counted
// (each answered after 20 ms): batches of 10, py1s shuffled with seed 7,
// 2 fetch slots, the cache limit, the workers taking turns or not.
func openCounted(ctx context.Context, t *testing.T, mb storage.Bucket, limit int64, ordered bool) (*Dataset, *getCounter) {
	t.Helper()
	gc := &getCounter{Bucket: mb, latency: 20 * time.Millisecond, gets: map[string]int{}}
	reg := &storage.Registry{}
	reg.Register("mem", func(context.Context, *url.URL) (storage.Bucket, error) { return gc, nil })
	seed := int64(7)
	ds, err := Open(ctx, &Options{Remote: "mem://data", Local: t.TempDir(), Registry: reg,
		BatchSize: 10, Shuffle: true, ShuffleAlgo: plan.AlgoPy1s, ShuffleSeed: &seed, CacheLimit: limit,
		PrefetchConcurrency: 2, OrderAdmissions: ordered})
	if err != nil {
		t.Fatal(err)
	}
	return ds, gc
}

// lazyPlanRun reads one epoch of a rank's workers taking turns, each on
// its own goroutine, and returns the GETs per object. The mapping of each
// worker's plan past its first batch is delayed by delay; with a negative
// delay the reading begins once every worker's plan is mapped.
func lazyPlanRun(t *testing.T, mb storage.Bucket, workers int, delay time.Duration) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ds, gc := openCounted(ctx, t, mb, 800_000, true)
	defer ds.Close()
	if delay > 0 {
		ds.workerGroup().beforeMap = func() { time.Sleep(delay) }
	}
	ep, err := ds.NewEpoch(ctx, plan.World{Nodes: 1, RanksPerNode: 1}, workers)
	if err != nil {
		t.Fatal(err)
	}
	its := make([]*Iterator, workers)
	for w := range workers {
		if its[w], err = ep.Iter(ctx, w); err != nil {
			t.Fatal(err)
		}
		if its[w].mapped == nil {
			t.Fatalf("worker %d's plan is not mapped lazily: the test does not reach the case", w)
		}
	}
	if delay < 0 {
		for _, it := range its {
			<-it.mapped
		}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := map[int64]int{}
	for _, it := range its {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer it.Close()
			for it.Next() {
				mu.Lock()
				seen[it.ID()]++
				mu.Unlock()
			}
			if err := it.Err(); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	want := map[int64]int{}
	for w := range workers {
		ids, err := ep.Plan().Worker(0, 0, w)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			if id >= 0 {
				want[id]++
			}
		}
	}
	if !maps.Equal(seen, want) {
		t.Errorf("the samples delivered are not the plan's")
	}
	return maps.Clone(gc.gets)
}

// TestOrderAdmissionsLazyPlan checks that workers taking turns download
// the same whenever the rest of their plans (past the first batch) is
// mapped: a worker whose first turn came before the mapping ended walked
// ahead over its first batch alone (the shards past it were fetched a turn
// later, when others had changed the cache), and the GETs depended on it
// (TestValidateAgainstS3's 800 KB rows: 40 requests against 39 simulated
// in 1-3 runs of 8 under -race). The dataset and cache are that row's: 13
// shards of ~77 KB, ~10 held, two workers.
func TestOrderAdmissionsLazyPlan(t *testing.T) {
	mb := lazyPlanStore(t, 240, 4000, 80_000)
	want := lazyPlanRun(t, mb, 2, -1)
	total := 0
	for _, n := range want {
		total += n
	}
	t.Logf("plans mapped before the reading: %d GETs", total)
	for _, delay := range []time.Duration{0, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond} {
		if got := lazyPlanRun(t, mb, 2, delay); !maps.Equal(got, want) {
			t.Errorf("mapping delayed by %s: GETs %v, want %v (the plans mapped before the reading)", delay, got, want)
		}
	}
}
