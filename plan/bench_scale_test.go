package plan_test

import (
	"testing"

	"github.com/sluicedata/sluice/internal/cputime"
	"github.com/sluicedata/sluice/plan"
)

// scaleStreams is one stream shaped like a 40k-shard dataset: shards of
// 4000–4096 samples (162M samples).
func scaleStreams() []plan.Stream {
	sizes := make([]int64, 40_000)
	for i := range sizes {
		sizes[i] = int64(4000 + i%97)
	}
	return []plan.Stream{{ShardSizes: sizes}}
}

// BenchmarkFirstBatchAtScale measures the first batch of rank 0 (worker
// 0) on 20 nodes × 8 ranks × 8 workers of a 40k-shard dataset once the
// index is local: the Planner, the Epoch (the shuffle's preparation) and
// one mapped batch, from nothing. The guard checks the batch's IDs are in
// range and distinct.
func BenchmarkFirstBatchAtScale(b *testing.B) {
	streams := scaleStreams()
	var total int64
	for _, n := range streams[0].ShardSizes {
		total += n
	}
	for _, algo := range []string{"none", plan.AlgoPy1e, plan.AlgoPy1s, plan.AlgoPy1br} {
		b.Run(algo, func(b *testing.B) {
			o := &plan.Options{Shuffle: algo != "none", BatchSize: 32}
			if o.Shuffle {
				o.ShuffleAlgo = algo
			}
			shape := plan.Shape{Nodes: 20, RanksPerNode: 8, WorkersPerRank: 8}
			b.ReportAllocs()
			cpu := cputime.Process()
			for b.Loop() {
				p, err := plan.New(streams, o)
				if err != nil {
					b.Fatal(err)
				}
				ep, err := p.Epoch(plan.EpochSpec{Shape: shape})
				if err != nil {
					b.Fatal(err)
				}
				it, err := ep.WorkerIter(0, 0, 0)
				if err != nil {
					b.Fatal(err)
				}
				seg, err := it.Next()
				if err != nil || len(seg) != 32 {
					b.Fatal(err, len(seg))
				}
				seen := map[int64]bool{}
				for _, id := range seg {
					if id < 0 || id >= total || seen[id] {
						b.Fatalf("bad id %d in %v", id, seg)
					}
					seen[id] = true
				}
			}
			reportCPU(b, cpu)
		})
	}
}
