package plan_test

import (
	"fmt"
	"testing"

	"github.com/sluicedata/sluice/plan"
)

// BenchmarkResumeFirst measures the time to the first batch after resuming
// at 10%, 50% and 90% of a 1M- and a 10M-sample epoch with WorkerIter
// (MosaicML defaults: one node, NCN 1 for py1e/py1br/naive and 64 for py1s,
// block size 4M; 8 ranks × 8 workers), from nothing: Epoch (the shuffle's
// preparation), the worker's positions, and one mapped batch.
func BenchmarkResumeFirst(b *testing.B) {
	for _, n := range []int64{1_000_000, 10_000_000} {
		for _, algo := range []string{"none", plan.AlgoPy1e, plan.AlgoPy1s, plan.AlgoPy1br, plan.AlgoNaive} {
			for _, at := range []int64{10, 50, 90} {
				if at != 90 && n != 10_000_000 {
					continue
				}
				b.Run(fmt.Sprintf("%s/n=%d/at=%d%%", algo, n, at), func(b *testing.B) {
					o := &plan.Options{Shuffle: algo != "none", BatchSize: 32}
					if o.Shuffle {
						o.ShuffleAlgo = algo
					}
					p, err := plan.New(benchStreams(n), o)
					if err != nil {
						b.Fatal(err)
					}
					shape := plan.Shape{Nodes: 1, RanksPerNode: 8, WorkersPerRank: 8}
					b.ReportAllocs()
					cpu := processCPU()
					for b.Loop() {
						ep, err := p.Epoch(plan.EpochSpec{SampleInEpoch: n * at / 100, Shape: shape})
						if err != nil {
							b.Fatal(err)
						}
						it, err := ep.WorkerIter(0, 3, 0)
						if err != nil {
							b.Fatal(err)
						}
						if seg, err := it.Next(); err != nil || len(seg) == 0 {
							b.Fatal(err, len(seg))
						}
					}
					reportCPU(b, cpu)
				})
			}
		}
	}
}
