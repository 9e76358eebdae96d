package partition_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicedata/sluice/internal/cputime"
	"github.com/sluicedata/sluice/partition"
)

var benchSizes = []int64{10_000, 1_000_000, 10_000_000, 100_000_000}

func label(n int64) string {
	if n >= 1_000_000 {
		return fmt.Sprintf("%dM", n/1_000_000)
	}
	return fmt.Sprintf("%dK", n/1_000)
}

func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cputime.Process()-start)/float64(b.N)/1e6, "cpu-ms/op")
}

// shape64 is 8 nodes × 8 ranks × 8 workers, batch 32, NCN 8.
func shape64(n, drop int64) partition.Params {
	return partition.Params{NumSamples: n, NumCanonicalNodes: 8, NumPhysicalNodes: 8, RanksPerNode: 8,
		WorkersPerRank: 8, BatchSize: 32, DropFirst: drop}
}

// BenchmarkGet materialises the whole partition, as upstream does.
func BenchmarkGet(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(label(n), func(b *testing.B) {
			b.ReportAllocs()
			cpu := cputime.Process()
			for b.Loop() {
				if _, _, err := partition.Get(shape64(n, 0)); err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, cpu)
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "samples/s")
		})
	}
}

// BenchmarkRank computes one rank's share (all its workers) of a fresh
// epoch: 1/64 of the samples.
func BenchmarkRank(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(label(n), func(b *testing.B) {
			b.ReportAllocs()
			cpu := cputime.Process()
			var dst []int64
			for b.Loop() {
				pt, err := partition.New(shape64(n, 0))
				if err != nil {
					b.Fatal(err)
				}
				dst = dst[:0]
				for w := range 8 {
					dst = pt.AppendWorker(dst, 7, 7, w)
				}
			}
			reportCPU(b, cpu)
			b.ReportMetric(float64(len(dst))*float64(b.N)/b.Elapsed().Seconds(), "entries/s")
		})
	}
}

// BenchmarkRankRelaxed is BenchmarkRank after an elastic resume from 8 to 6
// nodes with NCN 8 (relaxed re-deal through the initial partition).
func BenchmarkRankRelaxed(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(label(n), func(b *testing.B) {
			p := shape64(n, 0)
			p.NumPhysicalNodes, p.InitialPhysicalNodes = 6, 8
			// The global batch 6·8·32 = 1536 divides by the initial 8·8 devices.
			b.ReportAllocs()
			cpu := cputime.Process()
			var dst []int64
			for b.Loop() {
				pt, err := partition.New(p)
				if err != nil {
					b.Fatal(err)
				}
				dst = dst[:0]
				for w := range 8 {
					dst = pt.AppendWorker(dst, 5, 7, w)
				}
			}
			reportCPU(b, cpu)
		})
	}
}

// BenchmarkResume is the time to the first batch of one rank when resuming
// at 90% of the epoch.
func BenchmarkResume(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(label(n), func(b *testing.B) {
			drop := n * 9 / 10
			drop -= drop % (8 * 8 * 32)
			b.ReportAllocs()
			var sum int64
			for b.Loop() {
				pt, err := partition.New(shape64(n, drop))
				if err != nil {
					b.Fatal(err)
				}
				for i := range 32 {
					sum += pt.At(7, 7, 0, 0, i)
				}
			}
			_ = sum
		})
	}
}
