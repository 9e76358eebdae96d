package nprand

import "math/bits"

// MaxSourcesLen is the longest shuffle ShuffleSources serves: its steps'
// partners are kept as 32-bit indices.
const MaxSourcesLen = 1 << 32

// ShuffleSources reports where a shuffle of n elements takes the elements
// it leaves at positions at[k] (0 <= at[k] < n): after ShuffleInt64(x)
// on a copy of g, x[at[k]] is the original x[src[k]]. It makes only the
// draws of the steps n-1 down to min(at) (those of ShuffleInt64Tail(x,
// min(at)), after which g is where that leaves it) and moves no data:
// Fisher–Yates (numpy's order: i from n-1 down to 1) settles position p
// at step p with the element then at its partner r_p <= p: the original
// one there, unless a step made before (a higher i) swapped another in,
// and the last such step i took it from position i just before step i,
// and so on; so each source is one pass over the partners of steps p+1 …
// n-1, where the data shuffle writes the whole array and swaps through
// it. r is scratch for the partners (n values), returned for reuse. src
// must be as long as at; n must be at most MaxSourcesLen (it panics
// otherwise, as for a position out of range: the partners would not fit).
func (g *Generator) ShuffleSources(n int, at, src []int, r []uint32) []uint32 {
	if uint64(n) > MaxSourcesLen {
		panic("nprand: ShuffleSources of more than MaxSourcesLen elements")
	}
	if len(at) == 0 {
		return r
	}
	p0 := at[0]
	for _, p := range at[1:] {
		p0 = min(p0, p)
	}
	if n <= 1 {
		copy(src, at)
		return r
	}
	if cap(r) < n {
		r = make([]uint32, n)
	}
	r = r[:n]
	shufflePartners(g, r, uint64(max(p0, 1)))
	for k, p := range at {
		// r[n-1-t] is step t's partner: the steps p+1 … n-1 are
		// r[:n-1-p], scanned from its end. Position 0 has no step: its
		// element is the one there after step 1, found as any other's.
		q, end := uint32(0), n-1
		if p >= 1 {
			q, end = r[n-1-p], n-1-p
		}
		src[k] = int(sourceScan(r[:end], q, n-1))
	}
	return r
}

// sourceScan follows an element back from position q through the steps
// made after q's: rs[k] is the partner of step last-k, and rs's end is
// the first of those steps, so rs is scanned from there to its start. A
// step i whose partner is q put there the element then at position i,
// which is followed on from i. It returns the position the element came
// from.
func sourceScan(rs []uint32, q uint32, last int) uint32 {
	k := len(rs) - 1
	// Four steps a comparison in the common case (no partner is q).
	for ; k >= 3; k -= 4 {
		if rs[k] != q && rs[k-1] != q && rs[k-2] != q && rs[k-3] != q {
			continue
		}
		for u := k; u > k-4; u-- {
			if rs[u] == q {
				q = uint32(last - u)
			}
		}
	}
	for ; k >= 0; k-- {
		if rs[k] == q {
			q = uint32(last - k)
		}
	}
	return q
}

// shufflePartners makes the steps len(r)-1 down to stop (>= 1) of a
// shuffle of len(r) <= MaxSourcesLen elements, as shuffleLoop does, and
// sets r[len(r)-1-i] to step i's partner (the j that x[i] swaps with):
// the partners in the order the steps are made.
func shufflePartners(g *Generator, r []uint32, stop uint64) {
	n := uint64(len(r))
	i := n - 1
	if i < stop {
		return
	}
	if g.has32 {
		// The buffered half serves the first try (as Interval takes it).
		g.has32 = false
		if j := uint64(g.buf & (uint32(1)<<bits.Len64(i) - 1)); j <= i {
			r[n-1-i] = uint32(j)
			i--
		}
	}
	if i < stop {
		return
	}
	if !partnersFast(g, r[n-1-i:], i, stop) {
		for ; i >= stop; i-- {
			r[n-1-i] = uint32(g.Interval(i))
		}
	}
}
