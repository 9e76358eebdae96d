package stream_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluicedata/sluice/cache"
	"github.com/sluicedata/sluice/internal/dirsnap"
	"github.com/sluicedata/sluice/plan"
	"github.com/sluicedata/sluice/stream"
)

// dirBytes returns the bytes of the files under dir, excluding the cache's
// metadata, that existed together at one instant (a plain walk could count
// a shard evicted after its stat and one fetched meanwhile in a directory
// walked later: see dirsnap).
func dirBytes(dir string) int64 {
	return dirsnap.Bytes(dir, ".sluice", ".part")
}

// watchLimit checks the size of dir continuously until the returned func
// is called, failing the test if it ever exceeds limit.
func watchLimit(t *testing.T, dir string, limit int64) (stop func() int64) {
	t.Helper()
	var peak atomic.Int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			n := dirBytes(dir)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
		}
	}()
	return func() int64 {
		close(done)
		wg.Wait()
		p := peak.Load()
		if p > limit {
			t.Errorf("cache %s held %d bytes at some instant, over its limit %d", dir, p, limit)
		}
		return p
	}
}

// worker ids of the plan with padding dropped.
func planned(t *testing.T, ep *stream.Epoch, node, rank, worker int) []int64 {
	t.Helper()
	ids, err := ep.Plan().Worker(node, rank, worker)
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(slices.Clone(ids), func(x int64) bool { return x < 0 })
}

func TestRanksGetExactlyTheirPlan(t *testing.T) {
	const nodes, ranksPerNode, workers = 2, 2, 2
	for _, tc := range []struct {
		name    string
		limited bool
		shuffle bool
	}{
		{"unlimited", false, true},
		{"limited-sequential", true, false},
		{"limited-shuffled", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			sp := spec{samples: 1200, payload: 200, sizeLimit: 8 << 10, compression: "zstd"}
			var mu sync.Mutex
			seen := map[int64]int{}
			var padding int
			var wg sync.WaitGroup
			for node := range nodes {
				reg, cb := memDataset(t, sp)
				dir := t.TempDir()
				var limit int64
				if tc.limited {
					// Two thirds of the node's share of the dataset: 4
					// consumers on the node and fetches in flight (a
					// shard of random bytes takes 16 KiB while its zstd
					// form is decompressed).
					limit = 6 * (16 << 10)
				}
				c, err := cache.Open(ctx, dir, &cache.Options{Limit: limit})
				if err != nil {
					t.Fatal(err)
				}
				stop := func() int64 { return 0 }
				if tc.limited {
					stop = watchLimit(t, dir, limit)
				}
				var nodeWG sync.WaitGroup
				for r := range ranksPerNode {
					ds, err := stream.Open(ctx, &stream.Options{Remote: "mem://data", Registry: reg, Cache: c,
						BatchSize: 4, Shuffle: tc.shuffle, Predownload: 64})
					if err != nil {
						t.Fatal(err)
					}
					w := plan.World{Nodes: nodes, RanksPerNode: ranksPerNode, Rank: node*ranksPerNode + r}
					ep, err := ds.NewEpoch(ctx, w, workers)
					if err != nil {
						t.Fatal(err)
					}
					for wk := range workers {
						want := planned(t, ep, node, r, wk)
						all, _ := ep.Plan().Worker(node, r, wk)
						it, err := ep.Iter(ctx, wk)
						if err != nil {
							t.Fatal(err)
						}
						if it.Len() != len(all) {
							t.Errorf("node %d rank %d worker %d: Len %d, plan has %d slots", node, r, wk, it.Len(), len(all))
						}
						nodeWG.Add(1)
						go func() {
							defer nodeWG.Done()
							defer it.Close()
							var got []int64
							for it.Next() {
								if id := recordID(it.Record()); id != it.ID() {
									t.Errorf("sample %d: record holds id %d", it.ID(), id)
								}
								got = append(got, it.ID())
							}
							if err := it.Err(); err != nil {
								t.Error(err)
								return
							}
							if !slices.Equal(got, want) {
								t.Errorf("node %d rank %d worker %d: got %d samples, plan has %d (or order differs)", node, r, wk, len(got), len(want))
							}
							mu.Lock()
							for _, id := range got {
								seen[id]++
							}
							padding += len(all) - len(want)
							mu.Unlock()
						}()
					}
					t.Cleanup(func() { ds.Close() })
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					nodeWG.Wait()
					stop()
					if !tc.limited {
						for k, n := range cb.counts() {
							if n != 1 {
								t.Errorf("node %d: %s downloaded %d times, want once", node, k, n)
							}
						}
					}
					st := c.Stats()
					t.Logf("node %d: %+v", node, st)
					if tc.limited && st.Evictions == 0 {
						t.Errorf("node %d: no evictions under a limit below the dataset size", node)
					}
					c.Close()
				}()
			}
			wg.Wait()
			if len(seen) != sp.samples {
				t.Fatalf("%d distinct samples delivered, want %d", len(seen), sp.samples)
			}
			extra := 0
			for _, n := range seen {
				extra += n - 1
			}
			if extra > 0 {
				t.Logf("%d repeats (plan padding with -1 excluded: %d)", extra, padding)
			}
		})
	}
}

func TestResumeOnAnotherWorld(t *testing.T) {
	ctx := context.Background()
	reg, _ := memDataset(t, spec{samples: 960, payload: 64, sizeLimit: 4 << 10})
	open := func() *stream.Dataset {
		ds, err := stream.Open(ctx, &stream.Options{Remote: "mem://data", Local: t.TempDir(), Registry: reg,
			BatchSize: 8, Shuffle: true, NumCanonicalNodes: 4})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ds.Close() })
		return ds
	}
	// Run 1: 4 ranks, each stops after 12 batches (384 samples globally).
	seen := map[int64]int{}
	var state plan.State
	for r := range 4 {
		ds := open()
		ep, err := ds.NewEpoch(ctx, plan.World{Nodes: 4, RanksPerNode: 1, Rank: r}, 1)
		if err != nil {
			t.Fatal(err)
		}
		it, err := ep.RankIter(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for it.Yielded() < 12*8 && it.Next() {
			seen[it.ID()]++
		}
		it.Close()
		if state, err = ds.State(it.Yielded()); err != nil {
			t.Fatal(err)
		}
	}
	if state.SampleInEpoch != 384 {
		t.Fatalf("state %+v: want sample_in_epoch 384", state)
	}
	// Run 2: 3 ranks on one node resume.
	for r := range 3 {
		ds := open()
		if err := ds.Load(state); err != nil {
			t.Fatal(err)
		}
		ep, err := ds.NewEpoch(ctx, plan.World{Nodes: 1, RanksPerNode: 3, Rank: r}, 2)
		if err != nil {
			t.Fatal(err)
		}
		if ep.Number() != 0 || ep.SampleInEpoch() != 384 {
			t.Fatalf("resumed epoch %d at %d, want 0 at 384", ep.Number(), ep.SampleInEpoch())
		}
		it, err := ep.RankIter(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for it.Next() {
			seen[it.ID()]++
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
		it.Close()
	}
	for id := range int64(960) {
		if seen[id] != 1 {
			t.Errorf("sample %d delivered %d times across the stop and resume", id, seen[id])
		}
	}
}

func TestRandomAccessUnderLimit(t *testing.T) {
	ctx := context.Background()
	reg, _ := memDataset(t, spec{samples: 1000, payload: 300, sizeLimit: 8 << 10})
	dir := t.TempDir()
	limit := int64(5 * (8 << 10))
	ds, err := stream.Open(ctx, &stream.Options{Remote: "mem://data", Local: dir, Registry: reg, CacheLimit: limit})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	stop := watchLimit(t, dir, limit)
	var wg sync.WaitGroup
	for g := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 3))
			for range 300 {
				i := r.Int64N(1000)
				s, err := ds.Get(ctx, i)
				if err != nil {
					t.Error(err)
					return
				}
				if sampleID(t, s) != i {
					t.Errorf("Get(%d) returned %d", i, sampleID(t, s))
					return
				}
			}
		}()
	}
	wg.Wait()
	stop()
	if ds.Stats().Evictions == 0 {
		t.Error("no evictions")
	}
}

func TestEpochsAdvance(t *testing.T) {
	ctx := context.Background()
	reg, _ := memDataset(t, spec{samples: 100, payload: 10, sizeLimit: 1 << 10})
	ds, err := stream.Open(ctx, &stream.Options{Remote: "mem://data", Local: t.TempDir(), Registry: reg, BatchSize: 4, Shuffle: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	var orders [][]int64
	for e := range 2 {
		ep, err := ds.NewEpoch(ctx, plan.World{Nodes: 1, RanksPerNode: 1}, 1)
		if err != nil {
			t.Fatal(err)
		}
		if ep.Number() != int64(e) {
			t.Fatalf("epoch %d, want %d", ep.Number(), e)
		}
		it, _ := ep.RankIter(ctx)
		var ids []int64
		for it.Next() {
			ids = append(ids, it.ID())
		}
		it.Close()
		orders = append(orders, ids)
	}
	if slices.Equal(orders[0], orders[1]) {
		t.Error("two shuffled epochs in the same order")
	}
	for e, o := range orders {
		s := slices.Sorted(slices.Values(o))
		if len(s) != 100 || s[0] != 0 || s[99] != 99 || len(slices.Compact(s)) != 100 {
			t.Errorf("epoch %d is not a permutation of the 100 samples: %s", e, fmt.Sprint(len(s)))
		}
	}
}
