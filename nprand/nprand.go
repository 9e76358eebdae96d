// Package nprand reproduces, bit for bit, the parts of numpy's random
// Generator that MosaicML Streaming uses to order samples:
// numpy.random.default_rng(seed), i.e. Generator(PCG64(SeedSequence(seed))).
//
// The emulation follows Appendix A of the MDS specification
// (../shared/spec/MDS-FORMAT.md) and is checked against vectors produced by
// numpy 1.24.2 (testdata/numpy_rng.json and spec A.6).
//
// # API
//
//   - New(seed) returns a *Generator equal to default_rng(seed).
//   - Raw draws: Uint64 (next64), Uint32 (next32, buffered half of a 64-bit
//     draw, exactly like numpy), Float64 (53-bit double in [0, 1)), and
//     FillFloat64 (a run of Float64 draws on four interleaved LCG lanes).
//   - Primitives: Interval (masked rejection, numpy random_interval, used by
//     shuffle) and Bounded (Lemire, numpy random_bounded_uint64, used by
//     integers and choice).
//   - Methods with numpy's names: Shuffle / ShuffleInt64 / ShuffleInt32
//     (rng.shuffle; ShuffleInt64Tail makes only the steps that settle a
//     suffix), Permutation (rng.permutation), Integer and Integers
//     (rng.integers, high exclusive), Uniform and Uniforms (rng.uniform),
//     Choice (rng.choice(n, k, replace=False)).
//   - Advance(n) jumps the PCG64 state n steps ahead in O(log n), as numpy's
//     PCG64.advance does. SkipShuffle(n) (and SkipInterval) consume exactly the
//     draws a shuffle of n elements would, without any data: this is how
//     package shuffle finds the generator state at any shard of an epoch
//     without materialising the epoch (about 2 ns per element).
//   - CountLine counts a run of Float64-style draws below a threshold that
//     moves linearly, on integers and without storing the draws (package
//     shuffle's py1e resume counts positions with it).
//
// Shuffles and skips keep the generator state in registers and try both
// 32-bit halves of each 64-bit draw without branches; on a 1M-element slice a
// shuffle costs about 8 ms and a skip 2 ms (shared 2-core Xeon). A skip
// is bound by making its draws (three 64-bit multiplies each, about 5
// cycles a draw with the walk) and is inherently sequential: a walk
// started from a guessed point does not meet the exact one (a walk in a
// lower band accepts more often, so two walks drift apart at every band
// edge), so a run of skips cannot be split across goroutines cheaply and
// exactly (a trial over runs of 10,000-element shuffles: a walk from the
// expected starting point met the exact one after 16–17 shuffles for 2 of
// 5 seeds and not within 100 for the other 3).
//
// # Concurrency
//
// A Generator is a small value with mutable state; it is not safe for
// concurrent use. Copying a Generator value (g2 := *g) forks an independent
// generator with identical future output, which is how callers checkpoint a
// position in the stream.
package nprand

import (
	"errors"
	"fmt"
	"math/bits"
)

// ErrInvalidArgument is matched (errors.Is) by every error this package
// returns for arguments numpy itself would reject (empty ranges, sample sizes
// larger than the population, non-finite ranges).
var ErrInvalidArgument = errors.New("nprand: invalid argument")

// u128 is an unsigned 128-bit integer.
type u128 struct{ hi, lo uint64 }

func add128(a, b u128) u128 {
	lo, c := bits.Add64(a.lo, b.lo, 0)
	hi, _ := bits.Add64(a.hi, b.hi, c)
	return u128{hi, lo}
}

func mul128(a, b u128) u128 {
	hi, lo := bits.Mul64(a.lo, b.lo)
	hi += a.hi*b.lo + a.lo*b.hi
	return u128{hi, lo}
}

// pcgMult is PCG64's 128-bit LCG multiplier.
var pcgMult = u128{0x2360ed051fc65da4, 0x4385df649fccf645}

// Generator is numpy's Generator(PCG64) restricted to the methods Streaming
// uses. The zero value is not a valid generator; use New.
type Generator struct {
	state u128
	inc   u128
	// buf holds the upper half of the last 64-bit draw when has32 is set
	// (numpy's has_uint32/uinteger): next32 returns it before drawing again.
	buf   uint32
	has32 bool
}

// SeedWords returns the four 64-bit words numpy's SeedSequence(seed)
// generates for seeding PCG64 (spec A.1), and the mixed entropy pool.
// It is exported for tests and diagnostics.
func SeedWords(seed uint64) (s [4]uint64, pool [4]uint32) {
	const (
		initA = 0x43b0d7e5
		multA = 0x931e8875
		initB = 0x8b51f9dd
		multB = 0x58f38ded
		mixL  = 0xca01f9dd
		mixR  = 0x4973f715
	)
	entropy := []uint32{uint32(seed)}
	if seed>>32 != 0 {
		entropy = append(entropy, uint32(seed>>32))
	}
	h := uint32(initA)
	hashmix := func(v uint32) uint32 {
		v ^= h
		h *= multA
		v *= h
		v ^= v >> 16
		return v
	}
	mix := func(x, y uint32) uint32 {
		r := mixL*x - mixR*y
		return r ^ (r >> 16)
	}
	for i := range pool {
		var e uint32
		if i < len(entropy) {
			e = entropy[i]
		}
		pool[i] = hashmix(e)
	}
	for src := range pool {
		for dst := range pool {
			if src != dst {
				pool[dst] = mix(pool[dst], hashmix(pool[src]))
			}
		}
	}
	// A uint64 seed has at most two entropy words, so the loop over
	// additional words (index >= 4) of spec A.1 step 3 never runs.
	hb := uint32(initB)
	var w [8]uint32
	for i := range w {
		v := pool[i%4]
		v ^= hb
		hb *= multB
		v *= hb
		v ^= v >> 16
		w[i] = v
	}
	for k := range s {
		s[k] = uint64(w[2*k]) | uint64(w[2*k+1])<<32
	}
	return s, pool
}

// New returns a generator equal to numpy.random.default_rng(seed).
func New(seed uint64) *Generator {
	s, _ := SeedWords(seed)
	g := &Generator{}
	initstate := u128{s[0], s[1]}
	initseq := u128{s[2], s[3]}
	g.inc = u128{initseq.hi<<1 | initseq.lo>>63, initseq.lo<<1 | 1}
	g.step()
	g.state = add128(g.state, initstate)
	g.step()
	return g
}

func (g *Generator) step() {
	g.state = add128(mul128(g.state, pcgMult), g.inc)
}

// State returns the 128-bit LCG state and increment as (hi, lo) pairs, for
// tests and diagnostics.
func (g *Generator) State() (stateHi, stateLo, incHi, incLo uint64) {
	return g.state.hi, g.state.lo, g.inc.hi, g.inc.lo
}

// Uint64 returns the next 64-bit output (numpy next_uint64). It neither uses
// nor clears the buffered 32-bit half.
func (g *Generator) Uint64() uint64 {
	// Inline step: state = state*mult + inc (mod 2^128).
	hi, lo := bits.Mul64(g.state.lo, pcgMult.lo)
	hi += g.state.hi*pcgMult.lo + g.state.lo*pcgMult.hi
	lo, c := bits.Add64(lo, g.inc.lo, 0)
	hi, _ = bits.Add64(hi, g.inc.hi, c)
	g.state = u128{hi, lo}
	return bits.RotateLeft64(hi^lo, -int(hi>>58))
}

// Uint32 returns the next 32-bit output (numpy next_uint32): the saved upper
// half of an earlier 64-bit draw if there is one, else the lower half of a new
// 64-bit draw, saving its upper half.
func (g *Generator) Uint32() uint32 {
	if g.has32 {
		g.has32 = false
		return g.buf
	}
	x := g.Uint64()
	g.buf = uint32(x >> 32)
	g.has32 = true
	return uint32(x)
}

// Float64 returns a double in [0, 1) built from the top 53 bits of a 64-bit
// draw (numpy next_double).
func (g *Generator) Float64() float64 {
	return float64(int64(g.Uint64()>>11)) * (1.0 / 9007199254740992.0) // int64: a plain conversion (the value is < 2^53)
}

// Advance moves the generator n steps ahead in O(log n), as if Uint64 had
// been called n times. The buffered 32-bit half is left as it is (numpy's
// PCG64.advance clears it; callers here use Advance only to skip runs of
// 64-bit draws inside a method, which never touch the buffer).
func (g *Generator) Advance(n uint64) {
	// Brown's algorithm: compose the affine map x -> m*x + c with itself.
	accMult := u128{0, 1}
	accPlus := u128{}
	curMult := pcgMult
	curPlus := g.inc
	for n > 0 {
		if n&1 != 0 {
			accMult = mul128(accMult, curMult)
			accPlus = add128(mul128(accPlus, curMult), curPlus)
		}
		curPlus = mul128(add128(curMult, u128{0, 1}), curPlus)
		curMult = mul128(curMult, curMult)
		n >>= 1
	}
	g.state = add128(mul128(accMult, g.state), accPlus)
}

// Interval returns a value in [0, max] by masked rejection sampling (numpy
// random_interval), the primitive of Shuffle and Permutation.
func (g *Generator) Interval(max uint64) uint64 {
	if max == 0 {
		return 0
	}
	mask := max | max>>1
	mask |= mask >> 2
	mask |= mask >> 4
	mask |= mask >> 8
	mask |= mask >> 16
	mask |= mask >> 32
	if max <= 0xffffffff {
		m32 := uint32(mask)
		for {
			if v := g.Uint32() & m32; uint64(v) <= max {
				return uint64(v)
			}
		}
	}
	for {
		if v := g.Uint64() & mask; v <= max {
			return v
		}
	}
}

// SkipInterval consumes exactly the draws Interval(max) would consume.
func (g *Generator) SkipInterval(max uint64) { g.Interval(max) }

// SkipShuffle consumes exactly the draws a Shuffle of n elements would
// consume, without touching any data (no memory traffic; a few ns per
// element).
func (g *Generator) SkipShuffle(n int) {
	i := uint64(max(n, 1) - 1)
	for ; i > 0xffffffff; i-- {
		g.Interval(i) // 64-bit draws, only for > 2^32 elements
	}
	if i == 0 {
		return
	}
	if g.has32 {
		g.has32 = false
		if uint64(g.buf&(uint32(1)<<bits.Len64(i)-1)) <= i {
			i--
		}
	}
	if i == 0 {
		return
	}
	// Two interleaved lanes of the LCG: lane a holds state k+1 and lane b
	// state k+2, and both advance by two steps (x -> M²x + (M+1)·inc), so
	// the two 128-bit multiply chains run in parallel instead of one after
	// the other. Both 32-bit halves of each output are tried in turn; the
	// accept decisions are branch-free (they are unpredictable) and the mask
	// only changes when i falls below floor (rare, predictable).
	m2 := mul128(pcgMult, pcgMult)
	c2 := mul128(add128(pcgMult, u128{0, 1}), g.inc)
	a := add128(mul128(g.state, pcgMult), g.inc)
	b := add128(mul128(a, pcgMult), g.inc)
	ah, al, bh, bl := a.hi, a.lo, b.hi, b.lo
	mask := uint64(1)<<bits.Len64(i) - 1
	floor := (mask + 1) >> 1
	var rej uint64
	for {
		x := bits.RotateLeft64(ah^al, -int(ah>>58))
		_, rej = bits.Sub64(i, x&0xffffffff&mask, 0)
		i, _ = bits.Add64(i, ^uint64(0), rej)
		if i < floor {
			if i == 0 {
				g.buf, g.has32 = uint32(x>>32), true
				g.state = u128{ah, al}
				return
			}
			mask >>= 1
			floor >>= 1
		}
		_, rej = bits.Sub64(i, (x>>32)&mask, 0)
		i, _ = bits.Add64(i, ^uint64(0), rej)
		if i < floor {
			if i == 0 {
				g.state = u128{ah, al}
				return
			}
			mask >>= 1
			floor >>= 1
		}
		y := bits.RotateLeft64(bh^bl, -int(bh>>58))
		_, rej = bits.Sub64(i, y&0xffffffff&mask, 0)
		i, _ = bits.Add64(i, ^uint64(0), rej)
		if i < floor {
			if i == 0 {
				g.buf, g.has32 = uint32(y>>32), true
				g.state = u128{bh, bl}
				return
			}
			mask >>= 1
			floor >>= 1
		}
		_, rej = bits.Sub64(i, (y>>32)&mask, 0)
		i, _ = bits.Add64(i, ^uint64(0), rej)
		if i < floor {
			if i == 0 {
				g.state = u128{bh, bl}
				return
			}
			mask >>= 1
			floor >>= 1
		}
		// Advance both lanes two steps.
		hi, lo := bits.Mul64(al, m2.lo)
		hi += ah*m2.lo + al*m2.hi
		var c uint64
		al, c = bits.Add64(lo, c2.lo, 0)
		ah, _ = bits.Add64(hi, c2.hi, c)
		hi, lo = bits.Mul64(bl, m2.lo)
		hi += bh*m2.lo + bl*m2.hi
		bl, c = bits.Add64(lo, c2.lo, 0)
		bh, _ = bits.Add64(hi, c2.hi, c)
	}
}

// shuffleLoop runs numpy's Fisher–Yates loop on x: for i = len(x)-1 down to
// stop (at least 1) it swaps x[i] and x[Interval(i)]; stop 1 is the whole
// shuffle. It has the structure of SkipShuffle: generator state in locals,
// both 32-bit halves of a draw tried in turn, and a rejected try turned
// into a harmless self-swap instead of a branch. g is left after the draws
// of the steps made (a 32-bit half buffered when the last step used the
// lower half of a draw).
func shuffleLoop[T int32 | int64](g *Generator, x []T, stop uint64) {
	stop = max(stop, 1)
	i := uint64(max(len(x), 1) - 1)
	for ; i > 0xffffffff && i >= stop; i-- {
		j := g.Interval(i) // 64-bit draws, only for > 2^32 elements
		x[i], x[j] = x[j], x[i]
	}
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
	sh, sl := g.state.hi, g.state.lo
	ih, il := g.inc.hi, g.inc.lo
	for i >= stop {
		mask := uint64(1)<<bits.Len64(i) - 1
		floor := (mask + 1) >> 1
		lim := max(floor, stop) // below lim: a new band, or done
		for i >= lim {
			hi, lo := bits.Mul64(sl, pcgMult.lo)
			hi += sh*pcgMult.lo + sl*pcgMult.hi
			var c uint64
			lo, c = bits.Add64(lo, il, 0)
			hi, _ = bits.Add64(hi, ih, c)
			sh, sl = hi, lo
			r := bits.RotateLeft64(hi^lo, -int(hi>>58))
			j, d := i, uint64(0)
			if v := r & 0xffffffff & mask; v <= i {
				j, d = v, 1
			}
			x[i], x[j] = x[j], x[i]
			i -= d
			if i < lim {
				if i < stop {
					g.buf, g.has32 = uint32(r>>32), true
					break
				}
				if v := (r >> 32) & (mask >> 1); v <= i {
					x[i], x[v] = x[v], x[i]
					i--
				}
				break
			}
			j, d = i, 0
			if v := (r >> 32) & mask; v <= i {
				j, d = v, 1
			}
			x[i], x[j] = x[j], x[i]
			i -= d
		}
	}
	g.state = u128{sh, sl}
}

// Bounded returns a value in [0, rng] with Lemire's method without masking
// (numpy random_bounded_uint64), the primitive of Integers and Choice.
func (g *Generator) Bounded(rng uint64) uint64 {
	switch {
	case rng == 0:
		return 0
	case rng < 0xffffffff:
		excl := uint32(rng) + 1
		m := uint64(g.Uint32()) * uint64(excl)
		left := uint32(m)
		if left < excl {
			t := (0xffffffff - uint32(rng)) % excl
			for left < t {
				m = uint64(g.Uint32()) * uint64(excl)
				left = uint32(m)
			}
		}
		return m >> 32
	case rng == 0xffffffff:
		return uint64(g.Uint32())
	case rng == ^uint64(0):
		return g.Uint64()
	default:
		excl := rng + 1
		hi, lo := bits.Mul64(g.Uint64(), excl)
		if lo < excl {
			t := (^uint64(0) - rng) % excl
			for lo < t {
				hi, lo = bits.Mul64(g.Uint64(), excl)
			}
		}
		return hi
	}
}

// Shuffle permutes n elements in place like numpy's rng.shuffle: for i from
// n-1 down to 1 it swaps i with Interval(i). swap is called once per step,
// possibly with i == j.
func (g *Generator) Shuffle(n int, swap func(i, j int)) {
	for i := n - 1; i > 0; i-- {
		swap(i, int(g.Interval(uint64(i))))
	}
}

// ShuffleInt64 is Shuffle specialised for an []int64 (no callback).
func (g *Generator) ShuffleInt64(x []int64) {
	shuffleLoop(g, x, 1)
}

// ShuffleInt64Tail makes the steps of ShuffleInt64(x) for i = len(x)-1
// down to from (or 1): Fisher–Yates settles x[i] at step i, so afterwards
// x[from:] holds exactly what the whole shuffle leaves there, for about
// (len(x)-from)/len(x) of its cost. g is left after the draws of those
// steps, where the whole shuffle's generator is at that point.
func (g *Generator) ShuffleInt64Tail(x []int64, from int) {
	shuffleLoop(g, x, uint64(max(from, 1)))
}

// ShuffleInt32 is Shuffle specialised for an []int32 (no callback).
func (g *Generator) ShuffleInt32(x []int32) {
	shuffleLoop(g, x, 1)
}

// Permutation returns numpy's rng.permutation(n): 0..n-1 shuffled. n < 0
// yields an empty slice.
func (g *Generator) Permutation(n int) []int64 {
	if n < 0 {
		n = 0
	}
	x := make([]int64, n)
	for i := range x {
		x[i] = int64(i)
	}
	g.ShuffleInt64(x)
	return x
}

// Integer returns one value of numpy's rng.integers(lo, hi) (int64 dtype,
// hi exclusive).
func (g *Generator) Integer(lo, hi int64) (int64, error) {
	if hi <= lo {
		return 0, fmt.Errorf("%w: integers: high %d <= low %d", ErrInvalidArgument, hi, lo)
	}
	return lo + int64(g.Bounded(uint64(hi-1-lo))), nil
}

// Integers returns numpy's rng.integers(lo, hi, size=k) (int64 dtype, hi
// exclusive), drawing the values in order.
func (g *Generator) Integers(lo, hi int64, k int) ([]int64, error) {
	if hi <= lo {
		return nil, fmt.Errorf("%w: integers: high %d <= low %d", ErrInvalidArgument, hi, lo)
	}
	if k < 0 {
		return nil, fmt.Errorf("%w: integers: negative size %d", ErrInvalidArgument, k)
	}
	rng := uint64(hi - 1 - lo)
	out := make([]int64, k)
	for i := range out {
		out[i] = lo + int64(g.Bounded(rng))
	}
	return out, nil
}

// Uniform returns one value of numpy's rng.uniform(lo, hi).
func (g *Generator) Uniform(lo, hi float64) float64 {
	r := hi - lo
	// float64(...) forbids fusing into an FMA, which would round differently
	// from numpy on x86-64.
	return lo + float64(r*g.Float64())
}

// Uniforms returns numpy's rng.uniform(lo, hi, size=k).
func (g *Generator) Uniforms(lo, hi float64, k int) ([]float64, error) {
	r := hi - lo
	if r-r != 0 { // NaN or ±Inf
		return nil, fmt.Errorf("%w: uniform: range %v is not finite", ErrInvalidArgument, r)
	}
	if k < 0 {
		return nil, fmt.Errorf("%w: uniform: negative size %d", ErrInvalidArgument, k)
	}
	out := make([]float64, k)
	for i := range out {
		out[i] = lo + float64(r*g.Float64())
	}
	return out, nil
}

// Choice returns numpy's rng.choice(n, k, replace=False) with the default
// shuffle=True and no probabilities (spec A.5): k distinct values from
// [0, n) in numpy's exact order.
func (g *Generator) Choice(n, k int) ([]int64, error) {
	return g.choice(n, k, 1<<24)
}

// choice is Choice with the population size up to which the tail regime
// uses a dense array (larger ones are tracked sparsely).
func (g *Generator) choice(n, k, denseLimit int) ([]int64, error) {
	if n < 0 || k < 0 {
		return nil, fmt.Errorf("%w: choice: negative population %d or size %d", ErrInvalidArgument, n, k)
	}
	if k > n {
		return nil, fmt.Errorf("%w: choice: cannot take a larger sample (%d) than population (%d) without replacement", ErrInvalidArgument, k, n)
	}
	if k == 0 {
		return []int64{}, nil
	}
	if n > 10000 && k > n/50 {
		// Tail shuffle: the last k positions of a partial Fisher-Yates over
		// [0, n). Only positions that were swapped differ from the identity,
		// so a large population is tracked sparsely, in O(k) memory.
		stop := max(n-k, 1)
		if n <= denseLimit {
			a := make([]int64, n)
			for i := range a {
				a[i] = int64(i)
			}
			for i := n - 1; i >= stop; i-- {
				j := g.Bounded(uint64(i))
				a[i], a[j] = a[j], a[i]
			}
			out := make([]int64, k)
			copy(out, a[n-k:])
			return out, nil
		}
		moved := make(map[int64]int64, 2*k)
		get := func(i int64) int64 {
			if v, ok := moved[i]; ok {
				return v
			}
			return i
		}
		for i := int64(n - 1); i >= int64(stop); i-- {
			j := int64(g.Bounded(uint64(i)))
			vi, vj := get(i), get(j)
			moved[i], moved[j] = vj, vi
		}
		out := make([]int64, k)
		for i := range out {
			out[i] = get(int64(n - k + i))
		}
		return out, nil
	}
	// Floyd's algorithm, then a Lemire-based shuffle of the result.
	out := make([]int64, 0, k)
	seen := make(map[int64]struct{}, k)
	for j := n - k; j < n; j++ {
		v := int64(g.Bounded(uint64(j)))
		if _, dup := seen[v]; dup {
			v = int64(j)
		}
		seen[v] = struct{}{}
		out = append(out, v)
	}
	for i := k - 1; i > 0; i-- {
		t := g.Bounded(uint64(i))
		out[i], out[t] = out[t], out[i]
	}
	return out, nil
}

// FillFloat64 writes the next len(dst) Float64 draws into dst, exactly as
// that many calls of Float64 would, and leaves g after them. It runs four
// interleaved lanes of the LCG (each advancing four steps at a time), so
// the 128-bit multiply chains overlap instead of running one after the
// other: several times the throughput of a Float64 loop.
func (g *Generator) FillFloat64(dst []float64) {
	const scale = 1.0 / 9007199254740992.0
	if len(dst) < 8 {
		for i := range dst {
			dst[i] = g.Float64()
		}
		return
	}
	// Lanes hold states k+1 … k+4; each advances by x -> M⁴x + c4.
	m2 := mul128(pcgMult, pcgMult)
	c2 := mul128(add128(pcgMult, u128{0, 1}), g.inc)
	m4 := mul128(m2, m2)
	c4 := add128(mul128(c2, m2), c2)
	s0 := add128(mul128(g.state, pcgMult), g.inc)
	s1 := add128(mul128(s0, pcgMult), g.inc)
	s2 := add128(mul128(s1, pcgMult), g.inc)
	s3 := add128(mul128(s2, pcgMult), g.inc)
	ah, al, bh, bl := s0.hi, s0.lo, s1.hi, s1.lo
	ch, cl, dh, dl := s2.hi, s2.lo, s3.hi, s3.lo
	n := len(dst) &^ 3
	for i := 0; i < n; i += 4 {
		d := dst[i : i+4 : i+4]
		d[0] = float64(int64(bits.RotateLeft64(ah^al, -int(ah>>58))>>11)) * scale
		d[1] = float64(int64(bits.RotateLeft64(bh^bl, -int(bh>>58))>>11)) * scale
		d[2] = float64(int64(bits.RotateLeft64(ch^cl, -int(ch>>58))>>11)) * scale
		d[3] = float64(int64(bits.RotateLeft64(dh^dl, -int(dh>>58))>>11)) * scale
		if i+4 == n {
			break
		}
		var c uint64
		hi, lo := bits.Mul64(al, m4.lo)
		hi += ah*m4.lo + al*m4.hi
		al, c = bits.Add64(lo, c4.lo, 0)
		ah, _ = bits.Add64(hi, c4.hi, c)
		hi, lo = bits.Mul64(bl, m4.lo)
		hi += bh*m4.lo + bl*m4.hi
		bl, c = bits.Add64(lo, c4.lo, 0)
		bh, _ = bits.Add64(hi, c4.hi, c)
		hi, lo = bits.Mul64(cl, m4.lo)
		hi += ch*m4.lo + cl*m4.hi
		cl, c = bits.Add64(lo, c4.lo, 0)
		ch, _ = bits.Add64(hi, c4.hi, c)
		hi, lo = bits.Mul64(dl, m4.lo)
		hi += dh*m4.lo + dl*m4.hi
		dl, c = bits.Add64(lo, c4.lo, 0)
		dh, _ = bits.Add64(hi, c4.hi, c)
	}
	g.state = u128{dh, dl} // state after the last lane-d draw
	for i := n; i < len(dst); i++ {
		dst[i] = g.Float64()
	}
}
