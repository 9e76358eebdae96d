package nprand

import "math/bits"

// LineHit is a draw CountLine reports: the draw's index t in the run and
// its 53-bit value (the 64-bit output shifted right by 11, the bits
// Float64 scales into [0, 1)).
type LineHit struct {
	T     int
	Value uint64
}

// CountLine makes n 64-bit draws, exactly as n calls of Uint64 (or
// Float64) would, and compares each draw's 53-bit value r (the draw >> 11)
// with a line: for the t-th draw (t from 0) let k = k0 - t·step. It
// returns how many draws have r < k, and appends to hits every draw with
// k - lo <= r < k + hi, in draw order. n <= 0 makes no draws.
//
// It is a comparison of Float64 draws with a threshold that moves linearly
// (how package shuffle counts the positions j + lb + width·u below a bound)
// done on integers, fused with generation on two interleaved LCG lanes,
// without storing the draws: callers choose lo and hi to cover both their
// rounding and the draws they need exactly, and resolve the few hits with
// floating point. k0, step, lo and hi must keep every k - lo and k + hi
// within ±2^62, and lo, hi >= 0.
//
// On CPUs with AVX-512 IFMA runs of at least lineVecMin draws are made
// on 16 vector lanes (see countVec), with the same result.
func (g *Generator) CountLine(n int, k0, step, lo, hi int64, hits []LineHit) (int, []LineHit) {
	if b, h, ok := g.countLineFast(n, k0, step, lo, hi, hits); ok {
		return b, h
	}
	return g.countLineScalar(n, k0, step, lo, hi, hits)
}

// countLineScalar is CountLine on two scalar lanes.
func (g *Generator) countLineScalar(n int, k0, step, lo, hi int64, hits []LineHit) (int, []LineHit) {
	w := uint64(lo + hi) // region [k - lo, k + hi): uint64(r - k + lo) < w
	var below uint64
	t := 0
	if n >= 4 {
		// Two lanes hold states k+1 and k+2 and advance two steps at a
		// time (x -> M²x + (M+1)·inc): two independent multiply chains.
		// (Four lanes measured no faster here; both spill a few values
		// to the stack.)
		m2 := mul128(pcgMult, pcgMult)
		c2 := mul128(add128(pcgMult, u128{0, 1}), g.inc)
		s0 := add128(mul128(g.state, pcgMult), g.inc)
		s1 := add128(mul128(s0, pcgMult), g.inc)
		ah, al, bh, bl := s0.hi, s0.lo, s1.hi, s1.lo
		k := k0 - lo // d = r - (line - lo) = e + lo
		for end := n &^ 1; ; {
			// d = r - k + lo for draws t and t+1 (lines k and k-step).
			d0 := int64(bits.RotateLeft64(ah^al, -int(ah>>58))>>11) - k
			d1 := int64(bits.RotateLeft64(bh^bl, -int(bh>>58))>>11) - k + step
			below += uint64(d0-lo)>>63 + uint64(d1-lo)>>63
			if min(uint64(d0), uint64(d1)) < w {
				hits = lineHits(hits, t, k+lo, step, lo, w, d0-lo, d1-lo)
			}
			t += 2
			if t == end {
				break
			}
			k -= 2 * step
			var c uint64
			mh, ml := bits.Mul64(al, m2.lo)
			mh += ah*m2.lo + al*m2.hi
			al, c = bits.Add64(ml, c2.lo, 0)
			ah, _ = bits.Add64(mh, c2.hi, c)
			mh, ml = bits.Mul64(bl, m2.lo)
			mh += bh*m2.lo + bl*m2.hi
			bl, c = bits.Add64(ml, c2.lo, 0)
			bh, _ = bits.Add64(mh, c2.hi, c)
		}
		g.state = u128{bh, bl} // state after the last lane-b draw
	}
	for ; t < n; t++ {
		r := int64(g.Uint64() >> 11)
		e := r - (k0 - int64(t)*step)
		below += uint64(e) >> 63
		if uint64(e+lo) < w {
			hits = append(hits, LineHit{t, uint64(r)})
		}
	}
	return int(below), hits
}

// lineHits appends the draws t and t+1 of CountLine that lie in the
// region (e is each draw's r - k; the region is uint64(e + lo) < w).
func lineHits(hits []LineHit, t int, k, step, lo int64, w uint64, e0, e1 int64) []LineHit {
	for u, e := range [2]int64{e0, e1} {
		if uint64(e+lo) < w {
			hits = append(hits, LineHit{t + u, uint64(e + k - int64(u)*step)})
		}
	}
	return hits
}
