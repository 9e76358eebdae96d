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
// k - lo <= r < k + hi, in draw order.
//
// It is a comparison of Float64 draws with a threshold that moves linearly
// (how package shuffle counts the positions j + lb + width·u below a bound)
// done on integers, fused with generation on four interleaved LCG lanes,
// without storing the draws: callers choose lo and hi to cover both their
// rounding and the draws they need exactly, and resolve the few hits with
// floating point. k0, step, lo and hi must keep every k - lo and k + hi
// within ±2^62, and lo, hi >= 0.
func (g *Generator) CountLine(n int, k0, step, lo, hi int64, hits []LineHit) (int, []LineHit) {
	w := uint64(lo + hi) // region [k - lo, k + hi): uint64(r - k + lo) < w
	var below uint64
	t := 0
	if n >= 8 {
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
		step4 := 4 * step
		k := k0
		for end := n &^ 3; ; {
			// e = r - k for the four draws t … t+3 (their lines are k,
			// k-step, k-2·step, k-3·step).
			e0 := int64(bits.RotateLeft64(ah^al, -int(ah>>58))>>11) - k
			e1 := int64(bits.RotateLeft64(bh^bl, -int(bh>>58))>>11) - k + step
			e2 := int64(bits.RotateLeft64(ch^cl, -int(ch>>58))>>11) - k + 2*step
			e3 := int64(bits.RotateLeft64(dh^dl, -int(dh>>58))>>11) - k + 3*step
			below += uint64(e0)>>63 + uint64(e1)>>63 + uint64(e2)>>63 + uint64(e3)>>63
			if min(uint64(e0+lo), uint64(e1+lo), uint64(e2+lo), uint64(e3+lo)) < w {
				hits = lineHits(hits, t, k, step, lo, w, e0, e1, e2, e3)
			}
			t += 4
			k -= step4
			if t == end {
				break
			}
			var c uint64
			mh, ml := bits.Mul64(al, m4.lo)
			mh += ah*m4.lo + al*m4.hi
			al, c = bits.Add64(ml, c4.lo, 0)
			ah, _ = bits.Add64(mh, c4.hi, c)
			mh, ml = bits.Mul64(bl, m4.lo)
			mh += bh*m4.lo + bl*m4.hi
			bl, c = bits.Add64(ml, c4.lo, 0)
			bh, _ = bits.Add64(mh, c4.hi, c)
			mh, ml = bits.Mul64(cl, m4.lo)
			mh += ch*m4.lo + cl*m4.hi
			cl, c = bits.Add64(ml, c4.lo, 0)
			ch, _ = bits.Add64(mh, c4.hi, c)
			mh, ml = bits.Mul64(dl, m4.lo)
			mh += dh*m4.lo + dl*m4.hi
			dl, c = bits.Add64(ml, c4.lo, 0)
			dh, _ = bits.Add64(mh, c4.hi, c)
		}
		g.state = u128{dh, dl} // state after the last lane-d draw
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

// lineHits appends the draws t … t+3 of CountLine that lie in the region
// (e is each draw's r - k; the region is uint64(e + lo) < w).
func lineHits(hits []LineHit, t int, k, step, lo int64, w uint64, e0, e1, e2, e3 int64) []LineHit {
	for u, e := range [4]int64{e0, e1, e2, e3} {
		if uint64(e+lo) < w {
			hits = append(hits, LineHit{t + u, uint64(e + k - int64(u)*step)})
		}
	}
	return hits
}
