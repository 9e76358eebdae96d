package nprand_test

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/sluicedata/sluice/internal/cputime"
	"github.com/sluicedata/sluice/nprand"
)

// TestCountLine compares CountLine with a plain loop of Uint64 draws:
// the count, the hits in order, and the generator left behind (through
// 32-bit draws, so a buffered half is compared too).
func TestCountLine(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 1))
	for it := range 3000 {
		seed := uint64(r.IntN(50))
		n := r.IntN(70)
		if it%10 == 0 {
			n = r.IntN(5000)
		}
		step := r.Int64N(1<<44) - 1<<30
		k0 := r.Int64N(1<<54) - 1<<52 + int64(n)*max(step, 0)/2
		lo, hi := r.Int64N(1<<50), r.Int64N(1<<50)
		if it%3 == 0 {
			lo, hi = 0, 0
		}
		a, b := nprand.New(seed), nprand.New(seed)
		if it%2 == 1 {
			a.Uint32()
			b.Uint32()
		}
		var want int
		var wantHits []nprand.LineHit
		for k := range n {
			v := int64(a.Uint64() >> 11)
			line := k0 - int64(k)*step
			if v < line {
				want++
			}
			if v >= line-lo && v < line+hi {
				wantHits = append(wantHits, nprand.LineHit{T: k, Value: uint64(v)})
			}
		}
		got, hits := b.CountLine(n, k0, step, lo, hi, nil)
		if got != want || !slices.Equal(hits, wantHits) {
			t.Fatalf("case %d (n=%d k0=%d step=%d lo=%d hi=%d): count %d, %d hits; want %d, %d", it, n, k0, step, lo, hi, got, len(hits), want, len(wantHits))
		}
		for d := range 3 {
			if x, y := a.Uint32(), b.Uint32(); x != y {
				t.Fatalf("case %d: draw %d after the run %x, want %x", it, d, y, x)
			}
		}
	}
}

// BenchmarkCountLine counts 4,096 draws against a line (a resume's count
// of positions below a bound), against FillFloat64 of as many draws.
func BenchmarkCountLine(b *testing.B) {
	b.Run("line", func(b *testing.B) {
		g := nprand.New(1)
		var s int
		cpu := cputime.Process()
		for b.Loop() {
			n, _ := g.CountLine(4096, 1<<52, 1<<40, 1<<20, 1<<20, nil)
			s += n
		}
		reportCPU(b, cpu)
		_ = s
	})
	b.Run("fill", func(b *testing.B) {
		g := nprand.New(1)
		d := make([]float64, 4096)
		cpu := cputime.Process()
		for b.Loop() {
			g.FillFloat64(d)
		}
		reportCPU(b, cpu)
	})
}

// reportCPU reports the process CPU time per operation since start (the
// benchmarks here run on one goroutine; wall time on a shared machine also
// counts waiting for a core).
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cputime.Process()-start)/float64(b.N), "cpu-ns/op")
}

// TestSkipShuffleMatchesIntervals replays shuffles draw by draw with
// Interval (numpy's random_interval loop) and compares the generator
// SkipShuffle leaves, over sizes in every band up to 2^17, random
// generators and both states of the buffered 32-bit half, and runs of
// consecutive shuffles (as py1e skips a node's spans).
func TestSkipShuffleMatchesIntervals(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 17))
	for it := range 400 {
		seed := r.Uint64()
		a, b := nprand.New(seed), nprand.New(seed)
		for range r.IntN(3) { // 0, 1 or 2 draws: with and without a buffered half
			a.Uint32()
			b.Uint32()
		}
		for range 1 + r.IntN(4) {
			n := r.IntN(1 << (1 + r.IntN(17)))
			for i := n - 1; i > 0; i-- {
				a.Interval(uint64(i))
			}
			b.SkipShuffle(n)
			if x, y := a.Uint32(), b.Uint32(); x != y {
				t.Fatalf("case %d (seed %d, n=%d): next draw after the skip %x, want %x", it, seed, n, y, x)
			}
		}
	}
}

// TestShuffleInt64Tail compares a partial shuffle with the whole one (the
// tail it settles) and its generator with a draw-by-draw replay of the
// same steps, for every kind of stopping point: inside a band, at a band's
// edge, at 0 and 1, at the end.
func TestShuffleInt64Tail(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	for it := range 2000 {
		seed := uint64(r.IntN(100))
		n := r.IntN(1 << (1 + r.IntN(14)))
		from := r.IntN(n + 2)
		switch it % 4 {
		case 0:
			from = 1 << r.IntN(15) // a band's edge
		case 1:
			from = (1 << r.IntN(15)) - 1
		}
		pre := it % 3
		full, part, rep := nprand.New(seed), nprand.New(seed), nprand.New(seed)
		for range pre {
			full.Uint32()
			part.Uint32()
			rep.Uint32()
		}
		x := arange(n)
		full.ShuffleInt64(x)
		y := arange(n)
		part.ShuffleInt64Tail(y, from)
		if from < n && !slices.Equal(x[max(from, 0):], y[max(from, 0):]) {
			t.Fatalf("case %d (n=%d from=%d pre=%d): tail differs from the whole shuffle's", it, n, from, pre)
		}
		for i := n - 1; i >= max(from, 1); i-- {
			rep.Interval(uint64(i))
		}
		for d := range 3 {
			if a, b := rep.Uint32(), part.Uint32(); a != b {
				t.Fatalf("case %d (n=%d from=%d pre=%d): draw %d after %x, want %x", it, n, from, pre, d, b, a)
			}
		}
	}
}

// TestCountLineEmpty checks that n <= 0 makes no draws.
func TestCountLineEmpty(t *testing.T) {
	for _, n := range []int{0, -1, -5} {
		a, b := nprand.New(3), nprand.New(3)
		if c, h := b.CountLine(n, 1<<52, 1, 1, 1, nil); c != 0 || len(h) != 0 {
			t.Fatalf("n=%d: count %d, %d hits", n, c, len(h))
		}
		if x, y := a.Uint64(), b.Uint64(); x != y {
			t.Fatalf("n=%d: the generator moved", n)
		}
	}
}
