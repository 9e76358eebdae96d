package shuffle_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicedata/sluice/internal/cputime"
	"github.com/sluicedata/sluice/partition"
	"github.com/sluicedata/sluice/shuffle"
)

// benchSizes are the epoch sizes of the targets; 100M runs only in
// benchmarks (about 1 GB per materialised array).
var benchSizes = []int64{10_000, 1_000_000, 10_000_000, 100_000_000}

// units splits n samples into shards of 10,000 samples (a typical MDS
// shard), the last one shorter.
func units(n int64) []int64 {
	var u []int64
	for n > 0 {
		z := min(n, 10_000)
		u = append(u, z)
		n -= z
	}
	return u
}

func label(n int64) string {
	switch {
	case n >= 1_000_000:
		return fmt.Sprintf("%dM", n/1_000_000)
	default:
		return fmt.Sprintf("%dK", n/1_000)
	}
}

// BenchmarkGet materialises the whole epoch permutation, as upstream's
// get_shuffle does (NCN 8, default block size).
func BenchmarkGet(b *testing.B) {
	for _, algo := range []string{"naive", "py1s", "py2s", "py1br", "py1e", "py1b"} {
		for _, n := range benchSizes {
			b.Run(algo+"/"+label(n), func(b *testing.B) {
				p := shuffle.Params{Algo: algo, UnitSizes: units(n), NumCanonicalNodes: 8, Seed: 9176}
				b.ReportAllocs()
				cpu := cputime.Process()
				for b.Loop() {
					if _, err := shuffle.Get(p); err != nil {
						b.Fatal(err)
					}
				}
				reportCPU(b, cpu)
				b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "samples/s")
			})
		}
	}
}

// BenchmarkNew measures the preparation alone: the replay of every random
// draw of the epoch, without sample data.
func BenchmarkNew(b *testing.B) {
	for _, algo := range []string{"py1s", "py2s", "py1br", "py1e"} {
		for _, n := range benchSizes {
			b.Run(algo+"/"+label(n), func(b *testing.B) {
				p := shuffle.Params{Algo: algo, UnitSizes: units(n), NumCanonicalNodes: 8, Seed: 9176}
				b.ReportAllocs()
				cpu := cputime.Process()
				for b.Loop() {
					if _, err := shuffle.New(p); err != nil {
						b.Fatal(err)
					}
				}
				reportCPU(b, cpu)
			})
		}
	}
}

// BenchmarkResume is the time to the first global batch (256 samples) when
// resuming at 90% of a 1M- and a 10M-sample epoch: New plus one Fill.
func BenchmarkResume(b *testing.B) {
	for _, algo := range []string{"py1s", "py2s", "py1br", "py1e", "py1b", "naive"} {
		for _, ncn := range []int{1, 8} {
			for _, n := range []int64{1_000_000, 10_000_000} {
				b.Run(fmt.Sprintf("%s/ncn=%d/%s", algo, ncn, label(n)), func(b *testing.B) {
					p := shuffle.Params{Algo: algo, UnitSizes: units(n), NumCanonicalNodes: ncn, Seed: 9176}
					dst := make([]int64, 256)
					b.ReportAllocs()
					cpu := cputime.Process()
					for b.Loop() {
						s, err := shuffle.New(p)
						if err != nil {
							b.Fatal(err)
						}
						if err := s.Fill(dst, n*9/10); err != nil {
							b.Fatal(err)
						}
					}
					reportCPU(b, cpu)
				})
			}
		}
	}
}

// BenchmarkRankPlan computes the sample IDs of one rank (the last one) for a
// whole epoch on 8 nodes × 8 ranks × 8 workers, batch 32,
// NCN 8: shuffle preparation, the rank's partition slice, and the mapping
// of its positions through the shuffle, in memory proportional to the
// rank's share plus one window.
func BenchmarkRankPlan(b *testing.B) {
	for _, algo := range []string{"py1e", "py1s", "py1br"} {
		for _, n := range benchSizes {
			b.Run(algo+"/"+label(n), func(b *testing.B) {
				b.ReportAllocs()
				cpu := cputime.Process()
				for b.Loop() {
					ids := rankPlan(b, algo, n)
					if len(ids) == 0 {
						b.Fatal("empty plan")
					}
				}
				reportCPU(b, cpu)
			})
		}
	}
}

// reportCPU reports the process CPU time per operation since start (it
// includes the garbage collector's work).
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cputime.Process()-start)/float64(b.N)/1e6, "cpu-ms/op")
}

func rankPlan(b *testing.B, algo string, n int64) []int64 {
	const nodes, ranks, workers, batch = 8, 8, 8, 32
	s, err := shuffle.New(shuffle.Params{Algo: algo, UnitSizes: units(n), NumCanonicalNodes: nodes, Seed: 9176})
	if err != nil {
		b.Fatal(err)
	}
	pt, err := partition.New(partition.Params{NumSamples: n, NumCanonicalNodes: nodes, NumPhysicalNodes: nodes,
		RanksPerNode: ranks, WorkersPerRank: workers, BatchSize: batch})
	if err != nil {
		b.Fatal(err)
	}
	var ids []int64
	for w := range workers {
		ids = pt.AppendWorker(ids, nodes-1, ranks-1, w)
	}
	// Map positions to sample IDs chunk by chunk over the touched range.
	lo, hi := int64(-1), int64(-1)
	for _, x := range ids {
		if x >= 0 && (lo < 0 || x < lo) {
			lo = x
		}
		hi = max(hi, x)
	}
	const chunk = 1 << 22
	nch := (hi-lo)/chunk + 1
	start := make([]int, nch+1)
	for _, x := range ids {
		if x >= 0 {
			start[(x-lo)/chunk+1]++
		}
	}
	for k := int64(1); k <= nch; k++ {
		start[k] += start[k-1]
	}
	order := make([]int, start[nch])
	next := append([]int(nil), start[:nch]...)
	for i, x := range ids {
		if x >= 0 {
			k := (x - lo) / chunk
			order[next[k]] = i
			next[k]++
		}
	}
	buf := make([]int64, min(chunk, hi-lo+1))
	for k := range nch {
		a := lo + k*chunk
		e := min(a+chunk, hi+1)
		if err := s.Fill(buf[:e-a], a); err != nil {
			b.Fatal(err)
		}
		for _, i := range order[start[k]:start[k+1]] {
			ids[i] = buf[ids[i]-a]
		}
	}
	return ids
}
