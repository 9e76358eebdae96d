package stream_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sluicedata/sluice/cache"
	"github.com/sluicedata/sluice/plan"
	"github.com/sluicedata/sluice/stream"
)

// readOrdered reads every worker's iterator of ep to its end on a
// goroutine of its own, the first skip samples of each passed with Skip
// (a resumed worker), and returns the samples delivered and, per worker,
// the most shards its walk held pinned at once and the pins left at the
// end of its plan (before Close).
func readOrdered(ctx context.Context, t *testing.T, ep *stream.Epoch, workers int, skip int64) (seen map[int64]int, most, left []int) {
	t.Helper()
	var mu sync.Mutex
	seen = map[int64]int{}
	most, left = make([]int, workers), make([]int, workers)
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
			pins := func() int {
				n := 0
				it.Pinned(func(*cache.Dataset, int) { n++ })
				return n
			}
			it.Skip(skip)
			for it.Next() {
				mu.Lock()
				seen[it.ID()]++
				mu.Unlock()
				most[w] = max(most[w], pins())
			}
			if err := it.Err(); err != nil {
				t.Error(err)
			}
			left[w] = pins()
		}()
	}
	wg.Wait()
	return seen, most, left
}

// turnPlanned returns the samples of ep's workers' plans after the first skip
// of each.
func turnPlanned(t *testing.T, ep *stream.Epoch, workers int, skip int64) map[int64]int {
	t.Helper()
	want := map[int64]int{}
	for w := range workers {
		ids, err := ep.Plan().Worker(0, 0, w)
		if err != nil {
			t.Fatal(err)
		}
		var k int64
		for _, id := range ids {
			if id < 0 {
				continue
			}
			if k++; k > skip {
				want[id]++
			}
		}
	}
	return want
}

// TestOrderAdmissionsPins checks the pins of workers taking turns
// (cache.Pinner): a worker's walk pins the shards it fetches ahead and
// its turn at each lets the pin go, so that none is left at the end of its
// plan; and that an epoch resumed midway (each worker skipping what it
// had), or with more workers than shards, delivers its plan's samples
// once each and ends well within its deadline.
func TestOrderAdmissionsPins(t *testing.T) {
	for _, tc := range []struct {
		name             string
		samples, workers int
		skip             int64
	}{
		{"epoch", 600, 3, 0},
		{"resumed", 600, 3, 40},
		{"more-workers-than-shards", 40, 6, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			reg, _ := memDataset(t, spec{samples: tc.samples, payload: 300, sizeLimit: 4 << 10})
			seed := int64(3)
			ds, err := stream.Open(ctx, &stream.Options{Remote: "mem://data", Local: t.TempDir(), Registry: reg,
				BatchSize: 4, Shuffle: true, ShuffleAlgo: plan.AlgoPy1s, ShuffleSeed: &seed, CacheLimit: 80_000,
				PrefetchConcurrency: 1, OrderAdmissions: true})
			if err != nil {
				t.Fatal(err)
			}
			defer ds.Close()
			ep, err := ds.NewEpoch(ctx, plan.World{Nodes: 1, RanksPerNode: 1}, tc.workers)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			seen, most, left := readOrdered(ctx, t, ep, tc.workers, tc.skip)
			want := turnPlanned(t, ep, tc.workers, tc.skip)
			if len(seen) != len(want) {
				t.Errorf("%d samples delivered, %d planned", len(seen), len(want))
			}
			for id, n := range want {
				if seen[id] != n {
					t.Errorf("sample %d delivered %d times, planned %d", id, seen[id], n)
				}
			}
			pinned := 0
			for w := range tc.workers {
				pinned += most[w]
				if left[w] != 0 {
					t.Errorf("worker %d: %d shards still pinned at the end of its plan (its turns leased them all)", w, left[w])
				}
			}
			if tc.name == "epoch" && pinned == 0 {
				t.Error("no worker ever pinned a shard: the case does not exercise the pins")
			}
			t.Logf("%d samples in %s; most pins per worker %v", len(seen), time.Since(start).Round(time.Millisecond), most)
		})
	}
}
