package stream_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicedata/sluice/plan"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/stream"
)

// openOrdered opens the ordered runs' dataset (600 samples in shards of
// 4 KB, a cache of ~7 shards besides the index, the workers taking turns)
// and begins an epoch of one rank with workers workers; the caller closes
// the dataset.
func openOrdered(ctx context.Context, t *testing.T, workers int) (*stream.Dataset, *stream.Epoch, *countingBucket) {
	t.Helper()
	reg, cb := memDataset(t, spec{samples: 600, payload: 300, sizeLimit: 4 << 10})
	seed := int64(3)
	ds, err := stream.Open(ctx, &stream.Options{Remote: "mem://data", Local: t.TempDir(), Registry: reg,
		BatchSize: 4, Shuffle: true, ShuffleAlgo: plan.AlgoPy1s, ShuffleSeed: &seed, CacheLimit: 44_000,
		PrefetchConcurrency: 2, OrderAdmissions: true})
	if err != nil {
		t.Fatal(err)
	}
	ep, err := ds.NewEpoch(ctx, plan.World{Nodes: 1, RanksPerNode: 1}, workers)
	if err != nil {
		ds.Close()
		t.Fatal(err)
	}
	return ds, ep, cb
}

// orderedRun reads one epoch of a rank with workers DataLoader workers,
// each on its own goroutine as the agent runs them, with the workers'
// shard changes ordered (OrderAdmissions) under a cache of ~7 shards besides the index (14.6 KB), and
// returns the store's GETs per object and the samples delivered and planned.
func orderedRun(t *testing.T, workers int, stop func(w int, n int64) bool) (gets map[string]int, seen, want map[int64]int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ds, ep, cb := openOrdered(ctx, t, workers)
	defer ds.Close()
	var mu sync.Mutex
	seen, want = map[int64]int{}, map[int64]int{}
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
	var wg sync.WaitGroup
	for w := range workers {
		it, err := ep.Iter(ctx, w)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer it.Close()
			var n int64
			for it.Next() {
				mu.Lock()
				seen[it.ID()]++
				mu.Unlock()
				n++
				if stop != nil && stop(w, n) {
					return
				}
			}
			if err := it.Err(); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	return maps.Clone(cb.counts()), seen, want
}

// TestOrderAdmissionsDeterministic checks that with the workers' shard
// changes ordered, what an evicting epoch downloads is the same on every
// run whatever the goroutines' timing, and the samples are the plan's.
func TestOrderAdmissionsDeterministic(t *testing.T) {
	var first map[string]int
	for run := range 4 {
		gets, seen, want := orderedRun(t, 3, nil)
		if !maps.Equal(seen, want) {
			t.Fatalf("run %d: samples delivered are not the plan's", run)
		}
		if run == 0 {
			first = gets
			total := 0
			for _, n := range gets {
				total += n
			}
			if total <= 13 {
				t.Fatalf("%d GETs: the cache did not evict and fetch again (%v)", total, gets)
			}
			continue
		}
		if fmt.Sprint(gets) != fmt.Sprint(first) {
			t.Errorf("run %d fetched %v, run 0 %v", run, gets, first)
		}
	}
}

// TestOrderAdmissionsLocations reads ordered workers as the agent does:
// a Location per sample, each released by the "client" 1-9 ms later on
// another goroutine. A worker's shard change waits in its turn until its
// client gave back every location it held, so that the cache holds at
// each turn every worker's current shard alone, as the model plays it
// (before, the shard change went on at once and the shards the clients
// still held stayed leased into the other workers' turns: 1413 changes
// with locations out in one run).
func TestOrderAdmissionsLocations(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ds, ep, _ := openOrdered(ctx, t, 2)
	defer ds.Close()
	var wg sync.WaitGroup
	var samples atomic.Int64
	for w := range 2 {
		it, err := ep.Iter(ctx, w)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer it.Close()
			var out atomic.Int64 // locations the client holds
			var releases sync.WaitGroup
			defer releases.Wait()
			last := -1
			for k := 0; it.Next(); k++ {
				if sh, _ := it.Shard(); sh != last {
					if n := out.Load(); last >= 0 && n != 0 {
						t.Errorf("worker %d: shard change to %d with %d locations still held", w, sh, n)
					}
					last = sh
				}
				loc, err := it.Location()
				if err != nil {
					t.Error(err)
					return
				}
				out.Add(1)
				samples.Add(1)
				releases.Add(1)
				time.AfterFunc(time.Duration(1+k*7%9)*time.Millisecond, func() {
					defer releases.Done()
					out.Add(-1)
					loc.Release()
				})
			}
			if err := it.Err(); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if samples.Load() < 600 {
		t.Errorf("%d samples, want the epoch's 600 at least", samples.Load())
	}
}

// TestOrderAdmissionsNoHang checks that ordered workers never wait for a
// worker that stops reading (closed midway, as a killed DataLoader
// worker's connection) for longer than the order's patience.
func TestOrderAdmissionsNoHang(t *testing.T) {
	_, seen, want := orderedRun(t, 2, func(w int, n int64) bool { return w == 1 && n == 30 })
	var got, all int
	for id, n := range seen {
		if n > want[id] {
			t.Fatalf("sample %d delivered %d times, planned %d", id, n, want[id])
		}
		got += n
	}
	for _, n := range want {
		all += n
	}
	if got != all/2+30 {
		t.Errorf("%d samples delivered, want worker 0's %d and 30 of worker 1's", got, all/2)
	}
}

// TestOrderAdmissionsSequential reads the workers one after the other on
// one goroutine: worker 0's shard changes wait for worker 1, which is not
// read yet, only for the order's patience, once.
func TestOrderAdmissionsSequential(t *testing.T) {
	if testing.Short() {
		t.Skip("waits the order's patience")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	reg, _ := memDataset(t, spec{samples: 200, payload: 300, sizeLimit: 4 << 10})
	ds, err := stream.Open(ctx, &stream.Options{Remote: "mem://data", Local: t.TempDir(), Registry: reg,
		BatchSize: 4, Shuffle: true, CacheLimit: 6 * (4 << 10), OrderAdmissions: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	ep, err := ds.NewEpoch(ctx, plan.World{Nodes: 1, RanksPerNode: 1}, 2)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for w := range 2 {
		it, err := ep.Iter(ctx, w)
		if err != nil {
			t.Fatal(err)
		}
		for it.Next() {
			total++
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
		it.Close()
	}
	if total < 200 {
		t.Errorf("%d samples, want the epoch's 200 at least", total)
	}
}

// BenchmarkOrderAdmissions reads an epoch with 4 DataLoader workers, each
// on its own goroutine, under a cache limit that holds the dataset (warm:
// every shard change a hit, after a first epoch; cold: a fresh cache, every
// shard fetched once from memory), with and without the workers taking
// turns: the cost of the order itself, not of waiting for downloads. Two
// datasets: 20,000 samples of 100 B in 16 KB shards (~160 samples a
// shard; py1e's default block spans the dataset) and 40,000 of 1 KB in
// 2 MB shards (~2,000 samples a shard, as real datasets' MBs; py1e over
// blocks of 8,000 samples). Either way a worker changes shards at most
// of its samples (py1e spreads a shard's samples over its block).
func BenchmarkOrderAdmissions(b *testing.B) {
	for _, ds := range []struct {
		name      string
		samples   int
		payload   int
		sizeLimit int64
		block     int64 // py1e's shuffle block (0: its default, the whole dataset here)
	}{{"shards=16KB", 20000, 100, 16 << 10, 0}, {"shards=2MB", 40000, 1000, 2 << 20, 8000}} {
		reg, _ := memDataset(b, spec{samples: ds.samples, payload: ds.payload, sizeLimit: ds.sizeLimit})
		for _, warm := range []bool{true, false} {
			for _, ordered := range []bool{false, true} {
				b.Run(fmt.Sprintf("%s/warm=%v/ordered=%v", ds.name, warm, ordered), func(b *testing.B) {
					benchOrdered(b, reg, ds.samples, ds.block, warm, ordered)
				})
			}
		}
	}
}

// benchOrdered is one of BenchmarkOrderAdmissions's cases.
func benchOrdered(b *testing.B, reg *storage.Registry, samples int, block int64, warm, ordered bool) {
	ctx := context.Background()
	local := b.TempDir()
	open := func() *stream.Dataset {
		ds, err := stream.Open(ctx, &stream.Options{Remote: "mem://data", Local: local, Registry: reg,
			BatchSize: 8, Shuffle: true, ShuffleBlockSize: block, CacheLimit: 64 << 20, OrderAdmissions: ordered})
		if err != nil {
			b.Fatal(err)
		}
		return ds
	}
	epoch := func(ds *stream.Dataset) {
		ep, err := ds.NewEpoch(ctx, plan.World{Nodes: 1, RanksPerNode: 1}, 4)
		if err != nil {
			b.Fatal(err)
		}
		var wg sync.WaitGroup
		for w := range 4 {
			it, err := ep.Iter(ctx, w)
			if err != nil {
				b.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer it.Close()
				for it.Next() {
				}
				if err := it.Err(); err != nil {
					b.Error(err)
				}
			}()
		}
		wg.Wait()
	}
	ds := open()
	if warm {
		epoch(ds)
	}
	b.ResetTimer()
	for range b.N {
		if !warm {
			b.StopTimer()
			ds.Close()
			os.RemoveAll(local)
			ds = open()
			b.StartTimer()
		}
		epoch(ds)
	}
	b.StopTimer()
	ds.Close()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(samples), "ns/sample")
}
