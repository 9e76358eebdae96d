package plan_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicedata/sluice/internal/cputime"
	"github.com/sluicedata/sluice/plan"
)

// benchStreams is one stream of n samples in shards of 4096 (a typical MDS
// shard of small samples).
func benchStreams(n int64) []plan.Stream {
	const shard = 4096
	sizes := make([]int64, 0, n/shard+1)
	for rest := n; rest > 0; rest -= shard {
		sizes = append(sizes, min(rest, shard))
	}
	return []plan.Stream{{ShardSizes: sizes}}
}

var benchSizes = []int64{10_000, 1_000_000, 10_000_000, 100_000_000}

// BenchmarkRank measures planning one rank's epoch (all its workers, from
// nothing) on 8 nodes × 8 ranks × 8 workers with NCN 8, without shuffling
// and with several shuffles.
func BenchmarkRank(b *testing.B) {
	for _, n := range benchSizes {
		for _, algo := range []string{"none", plan.AlgoPy1e, plan.AlgoPy1s, plan.AlgoPy1br, plan.AlgoNaive} {
			if algo == plan.AlgoNaive && n > 10_000_000 {
				continue
			}
			b.Run(fmt.Sprintf("%s/n=%d", algo, n), func(b *testing.B) {
				o := &plan.Options{Shuffle: algo != "none", BatchSize: 32, NumCanonicalNodes: 8}
				if o.Shuffle {
					o.ShuffleAlgo = algo
				}
				streams := benchStreams(n)
				shape := plan.Shape{Nodes: 8, RanksPerNode: 8, WorkersPerRank: 8}
				b.ReportAllocs()
				cpu := cputime.Process()
				for b.Loop() {
					// A Planner of its own each time: its Epochs share
					// their shuffle's preparation.
					p, err := plan.New(streams, o)
					if err != nil {
						b.Fatal(err)
					}
					ep, err := p.Epoch(plan.EpochSpec{Epoch: 1, Shape: shape})
					if err != nil {
						b.Fatal(err)
					}
					for w := range shape.WorkersPerRank {
						if _, err := ep.Worker(3, 5, w); err != nil {
							b.Fatal(err)
						}
					}
				}
				reportCPU(b, cpu)
				b.ReportMetric(float64(n)/float64(shape.NumRanks())*float64(b.N)/b.Elapsed().Seconds(), "samples/s")
			})
		}
	}
}

// BenchmarkResume measures resuming at 90% of a 1M- and a 10M-sample epoch
// (MosaicML defaults: one node, NCN 1, block size 4M; 8 ranks × 8 workers):
// the time to one worker's remaining samples, from nothing.
func BenchmarkResume(b *testing.B) {
	for _, n := range []int64{1_000_000, 10_000_000} {
		for _, algo := range []string{plan.AlgoPy1e, plan.AlgoPy1s, plan.AlgoPy1br, plan.AlgoNaive} {
			b.Run(fmt.Sprintf("%s/n=%d", algo, n), func(b *testing.B) {
				streams := benchStreams(n)
				shape := plan.Shape{Nodes: 1, RanksPerNode: 8, WorkersPerRank: 8}
				b.ReportAllocs()
				cpu := cputime.Process()
				for b.Loop() {
					// A Planner of its own each time: its Epochs share
					// their shuffle's preparation.
					p, err := plan.New(streams, &plan.Options{Shuffle: true, ShuffleAlgo: algo, BatchSize: 32})
					if err != nil {
						b.Fatal(err)
					}
					ep, err := p.Epoch(plan.EpochSpec{SampleInEpoch: n * 9 / 10, Shape: shape})
					if err != nil {
						b.Fatal(err)
					}
					if _, err := ep.Worker(0, 3, 0); err != nil {
						b.Fatal(err)
					}
				}
				reportCPU(b, cpu)
			})
		}
	}
}

// BenchmarkResumeUnshuffled is the same without shuffling: the partition
// alone, O(the worker's share).
func BenchmarkResumeUnshuffled(b *testing.B) {
	const n = 10_000_000
	p, err := plan.New(benchStreams(n), &plan.Options{BatchSize: 32})
	if err != nil {
		b.Fatal(err)
	}
	shape := plan.Shape{Nodes: 1, RanksPerNode: 8, WorkersPerRank: 8}
	b.ReportAllocs()
	for b.Loop() {
		ep, err := p.Epoch(plan.EpochSpec{SampleInEpoch: n * 9 / 10, Shape: shape})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := ep.Worker(0, 3, 0); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNodeSchedule measures a node's shard schedule (all its ranks)
// for a 10M-sample epoch on 8 nodes × 8 ranks × 8 workers.
func BenchmarkNodeSchedule(b *testing.B) {
	p, err := plan.New(benchStreams(10_000_000), &plan.Options{Shuffle: true, BatchSize: 32, NumCanonicalNodes: 8})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		ep, err := p.Epoch(plan.EpochSpec{Shape: plan.Shape{Nodes: 8, RanksPerNode: 8, WorkersPerRank: 8}})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := ep.NodeSchedule(2); err != nil {
			b.Fatal(err)
		}
	}
}

// reportCPU reports the process CPU time per operation since start: on a
// shared machine wall time also counts the time spent waiting for a core.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cputime.Process()-start)/float64(b.N)/1e6, "cpu-ms/op")
}
