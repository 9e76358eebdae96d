package shuffle

import (
	"fmt"
	"math"
	"math/bits"
	"sort"
)

// Gather writes the sample IDs of the selected positions among
// [pos, pos+n) into dst, compactly and in increasing position order:
// position pos+i is selected when bit i%64 of want[i/64] is set. It returns
// the number written (the number of selected positions); dst must have room
// for them. Bits at or beyond n are ignored.
//
// For py1e it evaluates the same windows as Fill but keeps and sorts only
// the samples whose output ranks fall in fine buckets holding selected
// positions, so a consumer that needs a fraction of a range (one rank of a
// node, say) spends memory in proportion to that fraction, not to the
// range. The other algorithms fill the range in bounded chunks and keep
// the selected entries.
func (s *Shuffle) Gather(dst []int64, pos, n int64, want []uint64) (int, error) {
	if pos < 0 || n < 0 || pos > s.n || n > s.n-pos {
		return 0, fmt.Errorf("%w: positions [%d, %d) outside [0, %d)", ErrInvalid, pos, pos+n, s.n)
	}
	if int64(len(want))*64 < n {
		return 0, fmt.Errorf("%w: selection of %d bits for %d positions", ErrInvalid, len(want)*64, n)
	}
	sel := countBits(want, 0, n)
	if int64(len(dst)) < sel {
		return 0, fmt.Errorf("%w: %d selected positions, room for %d", ErrInvalid, sel, len(dst))
	}
	if sel == 0 {
		return 0, nil
	}
	if e, ok := s.impl.(*py1e); ok && s.n <= math.MaxInt32 {
		return e.gather(dst, pos, n, want), nil
	}
	chunk := max(s.ChunkHint(), 64)
	buf := make([]int64, min(n, chunk))
	out := 0
	for i := int64(0); i < n; i += chunk {
		k := min(chunk, n-i)
		if countBits(want, i, i+k) == 0 {
			continue
		}
		s.impl.fill(buf[:k], pos+i)
		forEachBit(want, i, i+k, func(b int64) {
			dst[out] = buf[b-i]
			out++
		})
	}
	return out, nil
}

// countBits returns the number of set bits in [from, to) of want.
func countBits(want []uint64, from, to int64) int64 {
	var c int64
	forEachWord(want, from, to, func(_ int64, w uint64) { c += int64(bits.OnesCount64(w)) })
	return c
}

// forEachBit calls fn with the index of every set bit in [from, to) of
// want, in increasing order.
func forEachBit(want []uint64, from, to int64, fn func(int64)) {
	forEachWord(want, from, to, func(base int64, w uint64) {
		for w != 0 {
			fn(base + int64(bits.TrailingZeros64(w)))
			w &= w - 1
		}
	})
}

// forEachWord calls fn for each word of want overlapping [from, to), masked
// to that range, with the index of the word's bit 0.
func forEachWord(want []uint64, from, to int64, fn func(base int64, w uint64)) {
	if from >= to {
		return
	}
	for wi := from >> 6; wi<<6 < to; wi++ {
		w := want[wi]
		if lo := from - wi<<6; lo > 0 {
			w &^= 1<<uint(lo) - 1
		}
		if hi := to - wi<<6; hi < 64 {
			w &= 1<<uint(hi) - 1
		}
		if w != 0 {
			fn(wi<<6, w)
		}
	}
}

// gather is Gather for py1e (n < 2^31 so sample IDs fit the pairs).
func (e *py1e) gather(dst []int64, pos, n int64, want []uint64) int {
	l := e.l
	out := 0
	for i := int64(0); i < n; {
		p := pos + i
		c := sort.Search(len(l.nodeSpan)-1, func(c int) bool {
			return l.spanPos[l.nodeSpan[c+1]] > p
		})
		ns, nstop := l.spanPos[l.nodeSpan[c]], l.spanPos[l.nodeSpan[c+1]]
		k := min(n-i, nstop-p)
		e.ready(c)
		if sm := e.sparseMax; (sm == 0 && k <= sparseDefault) || k <= sm {
			// Short: the sparse path's inputs of the range, and the IDs
			// of the selected ones only (each needs its span shuffled;
			// a worker's batch selects a few of a range of thousands).
			if sel, ok := e.sparseSel(c, p-ns, p-ns+k); ok {
				picked := make([]jPos, 0, countBits(want, i, i+k))
				forEachBit(want, i, i+k, func(b int64) { picked = append(picked, sel[b-i]) })
				e.idsOf(dst[out:out+len(picked)], c, picked)
				out += len(picked)
				i += k
				continue
			}
			tmp := make([]int64, k)
			e.fillNode(tmp, c, p-ns, p-ns+k)
			forEachBit(want, i, i+k, func(b int64) {
				dst[out] = tmp[b-i]
				out++
			})
			i += k
			continue
		}
		chunk := e.chunkSize(e.margin[c])
		for j := int64(0); j < k; j += chunk {
			m := min(chunk, k-j)
			if countBits(want, i+j, i+j+m) == 0 {
				continue
			}
			out += e.gatherWindow(dst[out:], c, p-ns+j, p-ns+j+m, want, i+j)
		}
		i += k
	}
	return out
}

// gatherWindow is fillWindow for a selection: node c's output ranks
// [lo, hi) whose bit (woff + rank - lo) is set in want, written compactly
// into dst. The count pass uses buckets of 256 keys; only the buckets
// that hold selected ranks are gathered and sorted.
func (e *py1e) gatherWindow(dst []int64, c int, lo, hi int64, want []uint64, woff int64) int {
	l := e.l
	first, last := l.nodeSpan[c], l.nodeSpan[c+1]
	ns := l.spanPos[first]
	m := l.spanPos[last] - ns
	margin := e.margin[c]
	mm := (margin - 2) / 2
	a, b := max(0, lo-margin), min(m, hi+margin)
	w := b - a
	base := a - mm - 1
	keys := w + 2*mm + 3
	const sh = 8
	nbk := keys>>sh + 1
	key := func(x float64) int64 {
		return min(max(int64(x)-base, 0), keys-1)
	}
	bstart := make([]int32, nbk+1)
	pb := make([]float64, min(w, 4096))
	for j := a; j < b; j += int64(len(pb)) {
		pk := pb[:min(int64(len(pb)), b-j)]
		e.positions(pk, c, j)
		for _, x := range pk {
			bstart[key(x)>>sh+1]++
		}
	}
	for k := int64(1); k <= nbk; k++ {
		bstart[k] += bstart[k-1]
	}
	// slot[k]: where bucket k's pairs start in pairs, -1 if not wanted.
	slot := make([]int32, nbk)
	for k := range slot {
		slot[k] = -1
	}
	var total int32
	k := int64(0)
	forEachBit(want, woff, woff+hi-lo, func(bit int64) {
		q := int32(lo + bit - woff - a) // window rank
		for bstart[k+1] <= q {
			k++
		}
		if slot[k] < 0 {
			slot[k] = total
			total += bstart[k+1] - bstart[k]
		}
	})
	// wp[k]: number of wanted buckets before k, to skip spans whose
	// positions cannot reach a wanted bucket (no shuffle, no draws).
	wp := make([]int32, nbk+1)
	for kk, s := range slot {
		wp[kk+1] = wp[kk]
		if s >= 0 {
			wp[kk+1]++
		}
	}
	next := make([]int32, nbk)
	copy(next, slot)
	pairs := make([]posIdx, total)
	var buf []int64
	for i := l.spanAt(ns + a); i < last && l.spanPos[i]-ns < b; i++ {
		off := l.spanPos[i] - ns
		from, to := max(off, a), min(off+l.spans[i].size(), b)
		if to <= from {
			continue
		}
		lb, width := e.low[i], e.width[i]
		// Positions lie in [j+lb, j+lb+width] up to rounding (slack 1).
		if klo, khi := key(float64(from)+lb-1)>>sh, key(float64(to-1)+lb+width+1)>>sh; wp[khi+1] == wp[klo] {
			continue
		}
		buf = shuffledSpanTail(buf, l.spans[i], e.shufCk[i], from-off)
		g := e.uniCk[i]
		g.Advance(uint64(from - off))
		for j := from; j < to; j++ {
			// Same expression as positions.
			x := float64(j) + (lb + float64(width*g.Float64()))
			kk := key(x) >> sh
			if s := next[kk]; s >= 0 {
				pairs[s] = posIdx{x, int32(j - a), int32(buf[j-off])}
				next[kk]++
			}
		}
	}
	var tmp []posIdx
	var cnt []int32
	for kk, s := range slot {
		if s >= 0 {
			z := bstart[kk+1] - bstart[kk]
			tmp, cnt = sortBucket(pairs[s:s+z], tmp, cnt, base+int64(kk)<<sh, 1<<sh)
		}
	}
	out := 0
	k = 0
	forEachBit(want, woff, woff+hi-lo, func(bit int64) {
		q := int32(lo + bit - woff - a)
		for bstart[k+1] <= q {
			k++
		}
		dst[out] = int64(pairs[slot[k]+q-bstart[k]].id)
		out++
	})
	return out
}
