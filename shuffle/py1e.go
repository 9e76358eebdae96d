package shuffle

import (
	"math"
	"sort"

	"github.com/sluicedata/sluice/nprand"
)

// py1e: within each canonical node, every span's IDs are shuffled, then each
// sample gets the position j + shift (shift uniform in a span-specific
// window of about the block size) and the node is read in ascending position
// order (spec §10.6).
type py1e struct {
	l      *layout
	shufCk []nprand.Generator // per span: epoch generator before its ID shuffle
	uniCk  []nprand.Generator // per span: epoch generator before its uniform draws
	low    []float64          // per span: uniform low bound
	width  []float64          // per span: uniform range (high - low)
	margin []int64            // per node: window margin (see fillWindow)
}

func newPy1e(l *layout, lo, hi int64) *py1e {
	ns := len(l.spans)
	e := &py1e{
		l:      l,
		shufCk: make([]nprand.Generator, ns),
		uniCk:  make([]nprand.Generator, ns),
		low:    make([]float64, ns),
		width:  make([]float64, ns),
		margin: make([]int64, len(l.nodeSpan)-1),
	}
	g := l.epoch
	for c := range e.margin {
		first, last := l.nodeSpan[c], l.nodeSpan[c+1]
		for i := first; i < last; i++ {
			e.shufCk[i] = g
			g.SkipShuffle(int(l.spans[i].size()))
		}
		m := l.spanPos[last] - l.spanPos[first]
		var off int64
		var maxShift float64
		for i := first; i < last; i++ {
			z := l.spans[i].size()
			r := lo + int64(g.Bounded(uint64(hi-1-lo)))
			cut := float64(r-z) / 2
			if cut < 0 {
				cut = 0
			}
			lb := max(-cut, -float64(off))
			ub := min(cut, float64(m-off-z))
			e.low[i], e.width[i] = lb, ub-lb
			e.uniCk[i] = g
			g.Advance(uint64(z))
			maxShift = max(maxShift, -lb, ub)
			off += z
		}
		// Every shift lies in [-maxShift, maxShift] (up to rounding), so a
		// sample at node index j ends up at a position within M of j.
		mm := int64(math.Ceil(maxShift)) + 1
		e.margin[c] = 2*mm + 2
	}
	return e
}

func (e *py1e) fill(dst []int64, pos int64) {
	l := e.l
	for len(dst) > 0 {
		// Canonical node holding pos: the spans' node boundaries are
		// positions, so search the node starts.
		c := sort.Search(len(l.nodeSpan)-1, func(c int) bool {
			return l.spanPos[l.nodeSpan[c+1]] > pos
		})
		ns, nstop := l.spanPos[l.nodeSpan[c]], l.spanPos[l.nodeSpan[c+1]]
		k := min(int64(len(dst)), nstop-pos)
		e.fillNode(dst[:k], c, pos-ns, pos-ns+k)
		dst = dst[k:]
		pos += k
	}
}

// fillNode writes node c's output positions [lo, hi) (node-relative) into
// dst, in chunks so that memory stays O(chunk + margin).
func (e *py1e) fillNode(dst []int64, c int, lo, hi int64) {
	chunk := max(int64(1)<<22, 4*e.margin[c])
	if hi-lo <= chunk+chunk/2 {
		e.fillWindow(dst, c, lo, hi)
		return
	}
	for lo < hi {
		k := min(chunk, hi-lo)
		e.fillWindow(dst[:k], c, lo, lo+k)
		dst = dst[k:]
		lo += k
	}
}

// fillWindow computes node c's output positions [lo, hi).
//
// With every shift bounded by M (margin = 2M+2), consider the input window
// [a, b) = [lo-margin, hi+margin) ∩ [0, m). A sample of the window whose
// position p lies in [a+M, b-M) has exactly a inputs before the window
// below it and none after the window below it, so its output rank is a plus
// its rank within the window. The samples of output ranks [lo, hi) have
// positions within M+1 of their rank, which is inside that safe range.
func (e *py1e) fillWindow(dst []int64, c int, lo, hi int64) {
	l := e.l
	first, last := l.nodeSpan[c], l.nodeSpan[c+1]
	ns := l.spanPos[first]
	m := l.spanPos[last] - ns
	margin := e.margin[c]
	mm := (margin - 2) / 2
	a, b := max(0, lo-margin), min(m, hi+margin)
	w := b - a

	// Positions of the window's inputs.
	p := make([]float64, w)
	i := l.spanAt(ns + a)
	for j := a; j < b; {
		off := l.spanPos[i] - ns
		end := min(off+l.spans[i].size(), b)
		if end > j {
			g := e.uniCk[i]
			g.Advance(uint64(j - off))
			lb, width := e.low[i], e.width[i]
			for ; j < end; j++ {
				p[j-a] = float64(j) + (lb + float64(width*g.Float64()))
			}
		}
		i++
	}

	// Counting sort by floor(position), then insertion sort inside each
	// bucket on (position, index); buckets hold about one sample each.
	base := a - mm - 1
	nb := w + 2*mm + 3
	key := func(x float64) int64 {
		k := int64(math.Floor(x)) - base
		return min(max(k, 0), nb-1)
	}
	start := make([]int32, nb+1)
	for _, x := range p {
		start[key(x)+1]++
	}
	for k := int64(1); k <= nb; k++ {
		start[k] += start[k-1]
	}
	order := make([]int32, w)
	for t, x := range p {
		k := key(x)
		order[start[k]] = int32(t)
		start[k]++
	}
	// start[k] is now the end of bucket k; bucket k begins at start[k-1].
	prev := int32(0)
	for k := range nb {
		bk := order[prev:start[k]]
		for x := 1; x < len(bk); x++ {
			v := bk[x]
			y := x
			for ; y > 0 && p[bk[y-1]] > p[v]; y-- {
				bk[y] = bk[y-1]
			}
			bk[y] = v
		}
		prev = start[k]
	}

	// Output ranks [lo, hi) are window ranks [lo-a, hi-a); find the span
	// shuffles their inputs need.
	sel := order[lo-a : hi-a]
	jmin, jmax := int64(math.MaxInt64), int64(-1)
	for _, t := range sel {
		j := a + int64(t)
		jmin, jmax = min(jmin, j), max(jmax, j)
	}
	cand := make([]int64, jmax-jmin+1)
	var buf []int64
	for i := l.spanAt(ns + jmin); i < last && l.spanPos[i]-ns <= jmax; i++ {
		off := l.spanPos[i] - ns
		z := l.spans[i].size()
		if z == 0 {
			continue
		}
		buf = shuffledSpan(buf, l.spans[i], e.shufCk[i])
		from, to := max(off, jmin), min(off+z, jmax+1)
		copy(cand[from-jmin:to-jmin], buf[from-off:to-off])
	}
	for x, t := range sel {
		dst[x] = cand[a+int64(t)-jmin]
	}
}

// py2s: units and their IDs shuffled by the run generator, split at node
// boundaries, then pieces and their IDs shuffled by the epoch generator.
type py2s struct {
	units    []span             // unit ID ranges in run-shuffled order
	runCk    []nprand.Generator // run generator before each unit's ID shuffle
	pieces   []piece            // final global order
	piecePos []int64            // len(pieces)+1
}

type piece struct {
	unit int   // index into units
	a, b int64 // range within the unit's run-shuffled IDs
	ck   nprand.Generator
}

func newPy2s(sizes []int64, n int64, ncn int, seed, epochSeed uint64) *py2s {
	s := &py2s{units: make([]span, len(sizes)), runCk: make([]nprand.Generator, len(sizes))}
	var o int64
	for i, z := range sizes {
		s.units[i] = span{o, o + z}
		o += z
	}
	run := nprand.New(seed)
	run.Shuffle(len(s.units), func(i, j int) { s.units[i], s.units[j] = s.units[j], s.units[i] })
	for i, u := range s.units {
		s.runCk[i] = *run
		run.SkipShuffle(int(u.size()))
	}
	epoch := nprand.New(epochSeed)
	idx := 0
	var taken, sofar int64 // taken: IDs of units[idx] already given to earlier parts
	s.pieces = make([]piece, 0, len(sizes)+ncn)
	for p := range ncn {
		end := partEnd(n, p+1, ncn)
		from := len(s.pieces)
		for idx < len(s.units) {
			left := s.units[idx].size() - taken
			if end < sofar+left {
				if sofar < end {
					split := end - sofar
					s.pieces = append(s.pieces, piece{unit: idx, a: taken, b: taken + split})
					taken += split
					sofar += split
				}
				break
			}
			s.pieces = append(s.pieces, piece{unit: idx, a: taken, b: taken + left})
			idx++
			taken = 0
			sofar += left
		}
		part := s.pieces[from:]
		epoch.Shuffle(len(part), func(i, j int) { part[i], part[j] = part[j], part[i] })
		for k := range part {
			part[k].ck = *epoch
			epoch.SkipShuffle(int(part[k].b - part[k].a))
		}
	}
	s.piecePos = make([]int64, len(s.pieces)+1)
	for k, pc := range s.pieces {
		s.piecePos[k+1] = s.piecePos[k] + pc.b - pc.a
	}
	return s
}

func (s *py2s) fill(dst []int64, pos int64) {
	k := sort.Search(len(s.pieces), func(k int) bool { return s.piecePos[k+1] > pos })
	var buf []int64
	for len(dst) > 0 {
		pc := s.pieces[k]
		buf = shuffledSpan(buf, s.units[pc.unit], s.runCk[pc.unit])
		ids := buf[pc.a:pc.b]
		g := pc.ck
		g.ShuffleInt64(ids)
		m := copy(dst, ids[pos-s.piecePos[k]:])
		dst = dst[m:]
		pos += int64(m)
		k++
	}
}
