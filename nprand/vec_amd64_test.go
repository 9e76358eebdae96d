package nprand

import (
	"math/bits"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

// The kernels run only where the CPU has AVX-512 IFMA; elsewhere (and
// for short runs) the scalar code serves SkipShuffle and CountLine, and
// the tests of those methods check it against numpy. These tests call
// both paths directly, so the scalar one is exercised on every CPU.

func needVec(t testing.TB) {
	t.Helper()
	if !hasVec {
		t.Skip("the CPU lacks AVX-512 IFMA: the vector kernels never run here")
	}
}

func TestPCGInverse(t *testing.T) {
	if got := mul128(pcgMult, pcgInv); got != (u128{0, 1}) {
		t.Fatalf("pcgMult * pcgInv = %#x, want 1", got)
	}
	g := New(7)
	s := g.state
	g.Uint64()
	if b := g.before(g.state); b != s {
		t.Fatalf("before(step(s)) = %#x, want %#x", b, s)
	}
}

func TestPCGConstants(t *testing.T) {
	p, sum := u128{0, 1}, u128{}
	for range 16 {
		sum = add128(sum, p)
		p = mul128(p, pcgMult)
	}
	if p != pcgMult16 || sum != pcgSum16 {
		t.Fatalf("M^16 = %#x, sum = %#x; the constants say %#x, %#x", p, sum, pcgMult16, pcgSum16)
	}
}

// TestVecLanes checks the lanes' layout and the output function against
// scalar draws.
func TestVecLanes(t *testing.T) {
	g := New(12345)
	var st vecState
	st.init(g)
	h := *g
	for k := range 16 {
		want := h.Uint64()
		if got := output(st.lane(k)); got != want {
			t.Fatalf("lane %d: output %#x, want %#x", k, got, want)
		}
	}
	// The 16-step map takes lane 0 to the 17th draw's state.
	s := fromLimbs(st.s[0][0], st.s[1][0], st.s[2][0])
	m, c := fromLimbs(st.m[0], st.m[1], st.m[2]), fromLimbs(st.c[0], st.c[1], st.c[2])
	if got, want := output(add128(mul128(s, m), c)), h.Uint64(); got != want {
		t.Fatalf("16-step map: output %#x, want %#x", got, want)
	}
}

// skipSizes are shuffle lengths around the kernel's thresholds and band
// edges, and a few long ones.
var skipSizes = []int{1, 2, 3, 200, skipVecMin, skipVecMin + 1, 257, 300, 511, 512, 513, 1000, 4095, 4096, 4097, 10_000, 65_537, 1 << 20}

// TestSkipVecMatchesScalar: the vector skip leaves the generator exactly
// where the scalar loop does (state and buffered half), from fresh and
// half-used generators, for many seeds and lengths.
func TestSkipVecMatchesScalar(t *testing.T) {
	needVec(t)
	r := rand.New(rand.NewPCG(1, 2))
	for trial := range 400 {
		n := skipSizes[trial%len(skipSizes)]
		if trial >= 2*len(skipSizes) {
			n = 1 + r.IntN(20_000)
		}
		g := New(r.Uint64())
		if trial%3 == 1 {
			g.Uint32() // a buffered upper half
		}
		for range r.IntN(5) {
			g.Uint64()
		}
		a, b := *g, *g
		i := a.skipStart(n)
		b.skipStart(n)
		if i == 0 {
			continue
		}
		a.skipLoop(i)
		if i >= skipVecMin {
			b.skipVector(i, 1+trial%3*vecBlocks) // some with a kernel call per block
		} else if b.skipFast(i) {
			t.Fatalf("skipFast ran the kernel for i=%d < %d", i, skipVecMin)
		} else {
			b.skipLoop(i)
		}
		if a != b {
			t.Fatalf("trial %d, n=%d: vector skip left %+v, scalar %+v", trial, n, b, a)
		}
		// The next draws agree too.
		if x, y := a.Uint32(), b.Uint32(); x != y {
			t.Fatalf("trial %d, n=%d: next draw %#x vs %#x", trial, n, y, x)
		}
	}
}

// TestSkipShufflesMatchesScalar: SkipShuffles on live lanes reports the
// generator before each shuffle and leaves it after the last exactly as
// scalar skips one after the other do, for runs of many lengths (empty,
// single, short, the kernel's thresholds, long) from fresh and half-used
// generators, with the kernel returning after every block, every other
// block or as usual.
func TestSkipShufflesMatchesScalar(t *testing.T) {
	needVec(t)
	r := rand.New(rand.NewPCG(7, 8))
	for trial := range 60 {
		sizes := make([]int, 1+r.IntN(80))
		for k := range sizes {
			switch r.IntN(6) {
			case 0:
				sizes[k] = r.IntN(3) // no draws
			case 1:
				sizes[k] = 1 + r.IntN(2*skipVecMin)
			case 2:
				sizes[k] = skipSizes[r.IntN(len(skipSizes)-1)] // not the 1<<20 one
			default:
				sizes[k] = 1 + r.IntN(9000)
			}
		}
		g := New(r.Uint64())
		if trial%3 == 1 {
			g.Uint32()
		}
		want := make([]Generator, len(sizes))
		a := *g
		for k, n := range sizes {
			want[k] = a
			if i := a.skipStart(n); i > 0 {
				a.skipLoop(i)
			}
		}
		b := *g
		var got []Generator
		b.skipsVector(len(sizes), func(k int) int { return sizes[k] }, func(k int, g Generator) {
			if k != len(got) {
				t.Fatalf("at(%d) after %d calls", k, len(got))
			}
			got = append(got, g)
		}, []int{1, 2, vecBlocks}[trial%3])
		for k := range sizes {
			if got[k] != want[k] {
				t.Fatalf("trial %d, before shuffle %d (sizes %v): %+v, scalar %+v", trial, k, sizes[:k+1], got[k], want[k])
			}
		}
		if a != b {
			t.Fatalf("trial %d: after the shuffles %+v, scalar %+v", trial, b, a)
		}
		if x, y := a.Uint32(), b.Uint32(); x != y {
			t.Fatalf("trial %d: next draw %#x vs %#x", trial, y, x)
		}
	}
}

// TestSkipVecBands runs the kernel from every i near the band edges
// (where its half blocks switch between the counted and the try-by-try
// path).
func TestSkipVecBands(t *testing.T) {
	needVec(t)
	for _, edge := range []uint64{64, 128, 256, 512, 1024, 1 << 16, 1 << 22} {
		for d := range uint64(70) {
			i := edge - 35 + d // the kernel serves any i >= 1 (SkipShuffle uses it from skipVecMin)
			if edge == 1<<22 && d%10 != 0 {
				continue // a long run: a few starts suffice
			}
			g := New(i ^ 0x9e3779b97f4a7c15)
			a, b := *g, *g
			a.skipLoop(i)
			b.skipVector(i, 1+int(d%2)*vecBlocks)
			if a != b {
				t.Fatalf("i=%d: vector skip left %+v, scalar %+v", i, b, a)
			}
		}
	}
}

// TestSkipVecHugeBands runs a few blocks of the kernel from i in the
// widest bands (masks of 2^31 and more, which it makes one by one: its
// counted halves form value + t in 32 bits) and just below, against the
// tries made one at a time.
func TestSkipVecHugeBands(t *testing.T) {
	needVec(t)
	for _, i0 := range []uint64{1<<32 - 1, 1<<32 - 20, 1<<31 + 40, 1<<31 + 3, 1<<31 - 1, 1<<31 - 30, 1<<30 + 7} {
		for seed := range uint64(20) {
			const blocks = 3
			g := New(seed*7919 + i0)
			a := *g
			var st vecState
			st.init(g)
			mask := uint64(1)<<bits.Len64(i0) - 1
			_, iv, mv := skipVec(&st, i0, mask, blocks, 0)
			i, m := i0, mask
			for range 32 * blocks {
				if uint64(a.Uint32())&m <= i {
					i--
				}
				if i <= m>>1 {
					m >>= 1
				}
			}
			if iv != i || mv != m {
				t.Fatalf("i0=%#x seed %d: kernel left i=%#x mask=%#x, tries one by one i=%#x mask=%#x", i0, seed, iv, mv, i, m)
			}
		}
	}
}

// TestCountLineVecMatchesScalar: the vector CountLine gives the scalar
// one's count, hits (in order) and final generator, for lines that cross
// the draws' range at random slopes and hit regions from empty to wide
// (more hits than one kernel call stores).
func TestCountLineVecMatchesScalar(t *testing.T) {
	needVec(t)
	r := rand.New(rand.NewPCG(3, 4))
	const full = int64(1) << 53
	for trial := range 300 {
		n := lineVecMin + r.IntN(5000)
		if trial%7 == 0 {
			n = lineVecMin + trial%17
		}
		if trial == 1 {
			n = 16*vecBlocks + 1000 // more than one kernel call
		}
		step := r.Int64N(full/int64(n)+1) - full/int64(4*n)
		k0 := r.Int64N(2*full) - full/2
		var lo, hi int64
		switch trial % 4 {
		case 0:
			lo, hi = 0, 0
		case 1:
			lo, hi = 1<<20, 1<<20
		case 2:
			lo, hi = r.Int64N(full/8), r.Int64N(full/8)
		case 3:
			lo, hi = full, full // every draw a hit
		}
		g := New(r.Uint64())
		if trial%2 == 1 {
			g.Uint32() // CountLine leaves the buffered half alone
		}
		a, b := *g, *g
		na, ha := a.countLineScalar(n, k0, step, lo, hi, nil)
		nb, hb := b.countLineVector(n, k0, step, lo, hi, []LineHit{{-1, 0}})
		if na != nb || !slices.Equal(ha, hb[1:]) || a != b {
			t.Fatalf("trial %d (n=%d k0=%d step=%d lo=%d hi=%d): vector %d below, %d hits, %+v; scalar %d, %d, %+v",
				trial, n, k0, step, lo, hi, nb, len(hb)-1, b, na, len(ha), a)
		}
	}
}

// BenchmarkSkipKernel measures a skip of one 4096-sample span (the
// benchmarks' shard) and of a 1M-element shuffle, scalar and vector.
func BenchmarkSkipKernel(b *testing.B) {
	for _, n := range []int{256, 512, 1024, 2048, 4096, 1 << 20} {
		for _, vec := range []bool{false, true} {
			name := "scalar"
			if vec {
				name = "vector"
			}
			b.Run(name+"/n="+strconv.Itoa(n), func(b *testing.B) {
				if vec {
					needVec(b)
				}
				g := New(1)
				for b.Loop() {
					i := g.skipStart(n)
					if vec {
						g.skipVector(i, vecBlocks)
					} else {
						g.skipLoop(i)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/element")
			})
		}
	}
}

// BenchmarkLineKernel measures CountLine over 1M draws, scalar and vector.
func BenchmarkLineKernel(b *testing.B) {
	const n = 1 << 20
	for _, vec := range []bool{false, true} {
		name := "scalar"
		if vec {
			name = "vector"
		}
		b.Run(name, func(b *testing.B) {
			if vec {
				needVec(b)
			}
			g := New(1)
			var hits []LineHit
			k0, step := int64(1)<<52, int64(1)<<52/n
			for b.Loop() {
				if vec {
					_, hits = g.countLineVector(n, k0, step, 1<<20, 1<<30, hits[:0])
				} else {
					_, hits = g.countLineScalar(n, k0, step, 1<<20, 1<<30, hits[:0])
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/draw")
		})
	}
}

// shuffleRef is shuffleLoop on the scalar steps alone (up to 2^32
// elements).
func shuffleRef[T int32 | int64](g *Generator, x []T, stop uint64) {
	stop = max(stop, 1)
	i := uint64(max(len(x), 1) - 1)
	if i < stop {
		return
	}
	if g.has32 {
		g.has32 = false
		if j := uint64(g.buf & (uint32(1)<<bits.Len64(i) - 1)); j <= i {
			x[i], x[j] = x[j], x[i]
			i--
		}
	}
	if i >= stop {
		shuffleSteps(g, x, i, stop)
	}
}

// TestShuffleVecMatchesScalar: the vector shuffle moves the data as the
// scalar steps do and leaves the generator where they do, for int64 and
// int32, whole shuffles and tails (stop > 1), fresh and half-used
// generators.
func TestShuffleVecMatchesScalar(t *testing.T) {
	needVec(t)
	r := rand.New(rand.NewPCG(5, 6))
	for trial := range 200 {
		n := skipSizes[trial%len(skipSizes)]
		if trial >= 2*len(skipSizes) {
			n = 1 + r.IntN(20_000)
		}
		stop := uint64(1)
		if trial%2 == 1 {
			stop = 1 + uint64(r.IntN(n))
		}
		g := New(r.Uint64())
		if trial%3 == 1 {
			g.Uint32()
		}
		x64, x32 := make([]int64, n), make([]int32, n)
		for k := range n {
			x64[k], x32[k] = int64(k), int32(k)
		}
		y64, y32 := slices.Clone(x64), slices.Clone(x32)
		a, b, c, d := *g, *g, *g, *g
		shuffleLoop(&a, x64, stop) // the kernel where it pays
		shuffleLoop(&b, x32, stop)
		shuffleRef(&c, y64, stop)
		shuffleRef(&d, y32, stop)
		if !slices.Equal(x64, y64) || !slices.Equal(x32, y32) || a != c || b != d {
			t.Fatalf("trial %d (n=%d stop=%d): vector shuffle differs from the scalar steps (generators %+v vs %+v)", trial, n, stop, a, c)
		}
	}
}

// TestShuffleFuncVecMatchesInterval: Shuffle with a swap callback (its
// partners drawn on the vector kernel where it pays) makes the same swaps
// in the same order, and leaves the generator where, numpy's loop of
// Interval draws does; with and without a buffered half, across the
// kernel's threshold and band edges.
func TestShuffleFuncVecMatchesInterval(t *testing.T) {
	needVec(t)
	r := rand.New(rand.NewPCG(7, 8))
	sizes := append([]int{0, 1, 2, skipVecMin, skipVecMin + 1, skipVecMin + 2, 2442, 2443}, skipSizes...)
	for trial := range 60 {
		n := sizes[trial%len(sizes)]
		if trial >= 2*len(sizes) {
			n = 1 + r.IntN(20_000)
		}
		g := New(r.Uint64())
		if trial%2 == 1 {
			g.Uint32()
		}
		type sw struct{ i, j int }
		var got, want []sw
		a, b := *g, *g
		a.Shuffle(n, func(i, j int) { got = append(got, sw{i, j}) })
		for i := n - 1; i > 0; i-- {
			want = append(want, sw{i, int(b.Interval(uint64(i)))})
		}
		if !a.has32 {
			a.buf, b.buf = 0, 0 // a spent half's stale copy does not matter
		}
		if !slices.Equal(got, want) || a != b {
			t.Fatalf("trial %d (n=%d): Shuffle made %d swaps, the Interval loop %d (first difference or generators %+v vs %+v)", trial, n, len(got), len(want), a, b)
		}
	}
}
