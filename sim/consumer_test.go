package sim

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/sluicedata/sluice/plan"
)

// consumerConfig is one node of 2 ranks × 3 workers over 30 shards of 6
// samples, shuffled, behind a slow link.
func consumerConfig(limit int64) *Config {
	sizes := make([]int64, 30)
	for i := range sizes {
		sizes[i] = 6
	}
	seed := int64(11)
	return &Config{
		Dataset:     UniformDataset(sizes, 100, 1000),
		Plan:        plan.Options{BatchSize: 4, Shuffle: true, ShuffleAlgo: plan.AlgoPy1s, ShuffleSeed: &seed},
		Shape:       plan.Shape{Nodes: 1, RanksPerNode: 2, WorkersPerRank: 3},
		Store:       Store{Latency: 200 * time.Millisecond, BandwidthPerNode: 20_000},
		StepTime:    Fixed(50 * time.Millisecond),
		Predownload: 9,
		CacheLimit:  limit,
	}
}

// workerShards returns, per worker (rank r, worker w at r×W+w), the shard
// of each sample it reads in the planner's own order (plan.Epoch.Worker,
// padding dropped).
func workerShards(t *testing.T, c *Config) [][]int {
	t.Helper()
	sizes := make([]int64, len(c.Dataset.Shards))
	for i, s := range c.Dataset.Shards {
		sizes[i] = s.Samples
	}
	opts := c.Plan
	p, err := plan.New([]plan.Stream{{ShardSizes: sizes}}, &opts)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := p.NewTracker().Begin(c.Shape)
	if err != nil {
		t.Fatal(err)
	}
	ep, err := p.Epoch(spec)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]int
	for r := range c.Shape.RanksPerNode {
		for w := range c.Shape.WorkersPerRank {
			ids, err := ep.Worker(0, r, w)
			if err != nil {
				t.Fatal(err)
			}
			var sh []int
			for _, id := range ids {
				if id >= 0 {
					sh = append(sh, int(id/6))
				}
			}
			out = append(out, sh)
		}
	}
	return out
}

// Every DataLoader worker has its own prefetcher, as the agent runs one
// stream iterator per worker: before its first sample is out each names
// its first sample's shard and nothing else (prefetch.FirstEnd: a worker
// whose first shard another is fetching joins that flight and does not
// move on to its next shard); every prefetch is a shard of the worker's
// own order (the planner's), met within its own window,
// with no more than its own fetch slots in flight and its own budget
// ahead, under a cache that evicts.
func TestPerConsumerPrefetch(t *testing.T) {
	c := consumerConfig(0)
	want := workerShards(t, c)
	var first []int
	before := make([]int, len(want))
	c.onPrefetch = func(nd *node, ci int, at int64, shard int) {
		shard = int(nd.gid[shard]) // the dataset's index
		if !nd.cons[ci].out {
			first = append(first, shard)
			if shard != want[ci][0] {
				t.Errorf("consumer %d prefetched shard %d before its first sample, whose shard is %d", ci, shard, want[ci][0])
			}
			if before[ci]++; before[ci] > 1 {
				t.Errorf("consumer %d prefetched %d shards before its first sample", ci, before[ci])
			}
		}
	}
	if _, err := Run(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	var wantFirst []int
	for _, sh := range want {
		if !slices.Contains(wantFirst, sh[0]) {
			wantFirst = append(wantFirst, sh[0])
		}
	}
	slices.Sort(first)
	slices.Sort(wantFirst)
	if !slices.Equal(first, wantFirst) {
		t.Errorf("prefetched before the first samples %v, want every worker's first shard once %v", first, wantFirst)
	}

	c = consumerConfig(1000 + 24*600)
	var n int
	c.onPrefetch = func(nd *node, ci int, at int64, shard int) {
		shard = int(nd.gid[shard]) // the dataset's index
		n++
		cs := &nd.cons[ci]
		if got := want[ci][at]; got != shard {
			t.Fatalf("consumer %d prefetched shard %d at %d, its order has shard %d", ci, shard, at, got)
		}
		if at < cs.pos || at >= cs.pos+cs.walk.Window {
			t.Fatalf("consumer %d prefetched at %d, outside its window [%d, %d)", ci, at, cs.pos, cs.pos+cs.walk.Window)
		}
		if cs.prefetching >= c.concurrency() || cs.walk.Ahead() >= nd.budget {
			t.Fatalf("consumer %d: %d in flight, %d ahead (slots %d, budget %d)", ci, cs.prefetching, cs.walk.Ahead(), c.concurrency(), nd.budget)
		}
	}
	r, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 || r.Nodes[0].Evictions == 0 {
		t.Fatalf("%d prefetches, %d evictions: the case does not exercise the walks under evictions", n, r.Nodes[0].Evictions)
	}
	t.Logf("%d prefetches, %d evictions, budget %d", n, r.Nodes[0].Evictions, prefetchBudget(c, c.consumers()))
}

// DataLoader workers read ahead of the training loop (torch's
// prefetch_factor): with no prefetch budget (the cache holds four shards,
// two consumers) every shard is read on demand when its worker begins the
// batch. 8 batches of one shard each, 100 ms per shard, a 1 s step, two
// workers: each worker reads its first two batches at once (the loop asks
// for prefetch_factor of each at the start) and batch s + 4 when batch s
// is taken, so after the first no step waits. Without read-ahead each
// batch would be read when its step begins: 7 stalls of 100 ms, which a
// rank iterator (no workers) still has.
func TestReadAhead(t *testing.T) {
	sizes := []int64{10, 10, 10, 10, 10, 10, 10, 10}
	cfg := func(rank bool, factor int) *Config {
		return &Config{
			Dataset:        UniformDataset(sizes, 100, 500),
			Plan:           plan.Options{BatchSize: 10},
			Shape:          plan.Shape{Nodes: 1, RanksPerNode: 1, WorkersPerRank: 2},
			RankIterator:   rank,
			PrefetchFactor: factor,
			Store:          Store{Latency: 100 * time.Millisecond},
			StepTime:       Fixed(time.Second),
			CacheLimit:     500 + 4*1000,
			IndexRequests:  2, // GET and Stat
		}
	}
	if b := prefetchBudget(cfg(false, 0), 2); b != 0 {
		t.Fatalf("budget %d, want none", b)
	}
	for _, factor := range []int{0, 1, 2, 3} {
		r, err := Run(context.Background(), cfg(false, factor))
		if err != nil {
			t.Fatal(err)
		}
		near(t, "ttfb", r.TimeToFirstBatchS, 0.1)
		if r.StalledSteps != 0 || r.Samples != 80 || r.StoreRequests != 2+8 {
			t.Errorf("prefetch factor %d: %d stalled steps (%.3f s), %d samples, %d requests; want none, 80, 10",
				factor, r.StalledSteps, r.StallS, r.Samples, r.StoreRequests)
		}
	}
	rc := cfg(true, 0)
	rc.CacheLimit = 500 + 2*1000 // one consumer: no budget either
	r, err := Run(context.Background(), rc)
	if err != nil {
		t.Fatal(err)
	}
	if r.StalledSteps != 7 || math.Abs(r.StallS-0.7) > 1e-9 {
		t.Errorf("rank iterator: %d stalled steps (%.3f s), want 7 (0.7 s)", r.StalledSteps, r.StallS)
	}
}
