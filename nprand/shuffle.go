package nprand

import "math/bits"

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
// element). On CPUs with AVX-512 IFMA the bulk runs on 16 vector lanes
// (see skipVec); elsewhere, and for short runs, on two scalar lanes.
func (g *Generator) SkipShuffle(n int) {
	i := g.skipStart(n)
	if i == 0 {
		return
	}
	if !g.skipFast(i) {
		g.skipLoop(i)
	}
}

// SkipShuffles makes the draws of SkipShuffle(size(k)) for k = 0, 1, …,
// count-1 in turn, calling at(k, g) with the generator as it is before
// shuffle k (a copy, which at may keep); g ends after the last shuffle.
// On CPUs with AVX-512 IFMA the vector kernel's lanes go on from one
// shuffle to the next instead of being set up for each (see skipsFast).
func (g *Generator) SkipShuffles(count int, size func(k int) int, at func(k int, g Generator)) {
	if g.skipsFast(count, size, at) {
		return
	}
	for k := range count {
		at(k, *g)
		g.SkipShuffle(size(k))
	}
}

// skipStart makes the steps of a shuffle of n elements that do not fit
// the 32-bit loops (64-bit draws for more than 2^32 elements, then the
// buffered 32-bit half) and returns the next step's i (0: done). has32 is
// clear afterwards whenever i > 0.
func (g *Generator) skipStart(n int) uint64 {
	i := uint64(max(n, 1) - 1)
	for ; i > 0xffffffff; i-- {
		g.Interval(i) // 64-bit draws, only for > 2^32 elements
	}
	if i == 0 {
		return 0
	}
	if g.has32 {
		g.has32 = false
		if uint64(g.buf&(uint32(1)<<bits.Len64(i)-1)) <= i {
			i--
		}
	}
	return i
}

// skipLoop makes a shuffle's steps i, i-1, …, 1 (0 < i <= 2^32-1, has32
// clear) on two scalar lanes.
func (g *Generator) skipLoop(i uint64) {
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
	if !shuffleFast(g, x, i, stop) {
		shuffleSteps(g, x, i, stop)
	}
}

// shuffleSteps is shuffleLoop's steps i, i-1, …, stop (i <= 2^32-1, has32
// clear) on scalar code.
func shuffleSteps[T int32 | int64](g *Generator, x []T, i, stop uint64) {
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

// Shuffle permutes n elements in place like numpy's rng.shuffle: for i from
// n-1 down to 1 it swaps i with Interval(i). swap is called once per step,
// possibly with i == j. On CPUs with AVX-512 IFMA the steps of a long
// shuffle draw their partners on the vector kernel (as ShuffleInt64 does),
// and swap follows them in order.
func (g *Generator) Shuffle(n int, swap func(i, j int)) {
	if n <= 1 {
		return
	}
	i := uint64(n - 1)
	if i > 0xffffffff {
		for ; i > 0; i-- {
			swap(int(i), int(g.Interval(i)))
		}
		return
	}
	if g.has32 {
		// The buffered half serves the first try (as Interval takes it).
		g.has32 = false
		if j := uint64(g.buf & (uint32(1)<<bits.Len64(i) - 1)); j <= i {
			swap(int(i), int(j))
			i--
		}
	}
	if i > 0 && shuffleSwapFast(g, i, swap) {
		return
	}
	for ; i > 0; i-- {
		swap(int(i), int(g.Interval(i)))
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
