package shuffle

import (
	"cmp"
	"math"
	"slices"
	"sort"
	"sync"

	"github.com/sluicedata/sluice/nprand"
)

// sparseDefault is the longest request served by fillSparse: a few batches,
// a resume's first request.
const sparseDefault = 1 << 14

// sparseWiden is how far beyond each end of a request fillSparse counts,
// so that nearby requests find it in the cache (sparseKeep entries).
const (
	sparseWiden = 1 << 12
	sparseKeep  = 4
)

// sparseEntry is a counted range of node c: the inputs of output ranks
// [below, below+n) — kept in rank order once sorted. A range is stored
// unsorted (raw, in input order, positions in [x0, x1)): the request that
// counted it selects its own ranks without sorting the rest, and the
// first request served from the cache sorts it (once).
type sparseEntry struct {
	c      int
	below  int64
	n      int64
	x0, x1 float64
	once   sync.Once
	raw    []jPos
	kept   []jPos
}

// sorted returns the entry's inputs in rank order, sorting them on first
// use.
func (s *sparseEntry) sorted() []jPos {
	s.once.Do(func() {
		if s.raw != nil {
			s.kept, s.raw = sortKept(s.raw, s.x0, s.x1), nil
		}
	})
	return s.kept
}

// sparseCached returns the inputs of node c's output ranks [lo, hi) from
// a counted range, if one holds them.
func (e *py1e) sparseCached(c int, lo, hi int64) ([]jPos, bool) {
	e.sparseMu.Lock()
	var hit *sparseEntry
	for _, s := range e.sparse {
		if s.c == c && s.below <= lo && s.below+s.n >= hi {
			hit = s
			break
		}
	}
	e.sparseMu.Unlock()
	if hit == nil {
		return nil, false
	}
	return hit.sorted()[lo-hit.below : hi-hit.below], true // sorted entries are never modified
}

func (e *py1e) sparseStore(s *sparseEntry) {
	e.sparseMu.Lock()
	defer e.sparseMu.Unlock()
	if len(e.sparse) == sparseKeep {
		e.sparse = slices.Delete(e.sparse, 0, 1)
	}
	e.sparse = append(e.sparse, s)
}

// fillSparse computes node c's output positions [lo, hi) (node-relative)
// for a short request, drawing only the shifts of inputs whose position can
// fall near the requested ranks instead of evaluating fillWindow's whole
// window twice.
//
// It guesses a position range [x0, x1) around [lo, hi) (the positions
// where the expected number of inputs below is lo - slack and hi + slack;
// the count's deviation from its expectation is about sqrt(M/3) for shifts
// bounded by M), then, span by span, counts the inputs certainly below x0
// without drawing (j + ub + 1 < x0), skips those certainly at or above x1,
// and draws the rest exactly as positions does: below counts those under
// x0, and the ones in [x0, x1) are kept. When below ≤ lo and below + kept ≥
// hi, the kept inputs sorted by (position, index) hold output ranks below,
// below+1, … exactly. Otherwise the guess is widened by the deficit and
// retried; after a few misses it reports false and the caller falls back to
// fillWindow. The cost is O(M + request) draws (M about half a block) plus
// the spans of the selected inputs, instead of O(2.5 blocks) twice.
func (e *py1e) fillSparse(dst []int64, c int, lo, hi int64) bool {
	sel, ok := e.sparseSel(c, lo, hi)
	if ok {
		e.idsOf(dst, c, sel)
	}
	return ok
}

// sparseSel returns the inputs (position, node index) of node c's output
// ranks [lo, hi), in rank order, counted as fillSparse describes; false
// when the guesses missed (the caller falls back to the window path).
func (e *py1e) sparseSel(c int, lo, hi int64) ([]jPos, bool) {
	e.ready(c)
	mm := (e.margin[c] - 2) / 2
	d := 6*int64(math.Sqrt(float64(mm)/3)) + 64
	if e.sparseSlack > 0 {
		d = e.sparseSlack
	}
	if sel, ok := e.sparseCached(c, lo, hi); ok {
		return sel, true
	}
	// Count a little around the request too: the neighbours' requests
	// (the other workers' first batches after a resume lie next to each
	// other) are then served from the cache, and widening costs a few
	// thousand draws against the margin's million.
	wlo, whi := lo-sparseWiden, hi+sparseWiden
	if e.sparseSlack > 0 {
		wlo, whi = lo, hi // the tests' forced retries
	}
	// The guesses need to be near the expectation only at the scale of
	// the slack (the count's deviation from it), not to a fraction of a
	// position: tol saves evaluations of the expectation (each a sum over
	// the ~1000 spans a shift can reach), and x1 starts from x0 plus the
	// ranks between (inputs lie about one per position).
	tol := max(0.25, float64(d)/64)
	x0 := e.expectedPos(c, float64(wlo-d), float64(wlo-d), tol)
	x1 := e.expectedPos(c, float64(whi+d), x0+float64(whi-wlo+2*d), tol)
	// The kept inputs are about one per position of [x0, x1).
	kept := make([]jPos, 0, int(x1-x0)+int(x1-x0)/8+64)
	for range 3 {
		var below int64
		below, kept = e.countKeep(c, x0, x1, kept[:0])
		n := int64(len(kept))
		if below <= lo && below+n >= hi {
			a, b := int(lo-below), int(hi-below)
			if (b-a)*4 >= len(kept) {
				kept = sortKept(kept, x0, x1)
				e.sparseStore(&sparseEntry{c: c, below: below, n: n, kept: kept})
				return kept[a:b], true
			}
			sel := selectKept(kept, x0, x1, a, b)
			e.sparseStore(&sparseEntry{c: c, below: below, n: n, x0: x0, x1: x1, raw: kept})
			return sel, true
		}
		if below > lo {
			x0 -= float64(below-lo) + float64(d)
		}
		if below+n < hi {
			x1 += float64(hi-below-n) + float64(d)
		}
	}
	return nil, false
}

// expectedPos returns a position x (node-relative) at which the expected
// number of node c's inputs with a smaller position is within about tol
// of r, searching from x0: the expectation is a sum over spans of closed
// forms (shifts are uniform in [lb, ub]), increasing in x, inverted by
// Newton steps and bisection. Near a node's edges the shift ranges are
// clipped and positions drift from ranks; this keeps the guess of
// fillSparse centred there too.
func (e *py1e) expectedPos(c int, r, x0, tol float64) float64 {
	l := e.l
	m := float64(l.spanPos[l.nodeSpan[c+1]] - l.spanPos[l.nodeSpan[c]])
	if r <= 0 || r >= m {
		return r
	}
	mm := float64((e.margin[c] - 2) / 2)
	lo, hi := r-mm-2, r+mm+2
	// Secant steps (the first with slope 1: inputs lie about one per
	// position, so away from the edges one or two steps land within tol
	// of r; near an edge positions crowd and the slope is measured),
	// each narrowing the bracket [lo, hi] (the expectation increases in
	// x); a step that leaves the bracket, and every other step after the
	// first few, bisects it instead, so it shrinks at least geometrically.
	x := min(max(x0, lo), hi)
	xp, fp := x, math.NaN()
	for k := 0; k < 64 && hi-lo > max(0.5, tol); k++ {
		f := e.expectedBelow(c, x)
		if math.Abs(f-r) <= tol {
			return x
		}
		if f < r {
			lo = max(lo, x)
		} else {
			hi = min(hi, x)
		}
		slope := 1.0
		if sl := (f - fp) / (x - xp); sl > 0 && sl < math.Inf(1) {
			slope = sl
		}
		xp, fp = x, f
		x -= (f - r) / slope
		if !(x > lo && x < hi) || k >= 4 && k%2 == 1 {
			x = (lo + hi) / 2
		}
	}
	return (lo + hi) / 2
}

// expectedBelow returns the expected number of node c's inputs with a
// position below x.
func (e *py1e) expectedBelow(c int, x float64) float64 {
	l := e.l
	first, last := l.nodeSpan[c], l.nodeSpan[c+1]
	ns := l.spanPos[first]
	mm := float64((e.margin[c] - 2) / 2)
	// Spans entirely below x - M - 1 count whole; find the first that is not.
	i := sort.Search(last-first, func(k int) bool {
		return float64(l.spanPos[first+k+1]-ns) > x-mm-1
	}) + first
	sum := float64(l.spanPos[i] - ns)
	for ; i < last; i++ {
		off := float64(l.spanPos[i] - ns)
		if off > x+mm+1 {
			break
		}
		z := float64(l.spans[i].size())
		lb, w := e.low[i], e.width[i]
		// Input j counts with probability clamp((x - lb - j)/w, 0, 1).
		t := x - lb
		if w <= 0 {
			sum += clampF(math.Ceil(t)-off, 0, z)
			continue
		}
		if t-w < off && t > off+z-1 {
			// Every input of the span partial (most of the spans
			// near x): the general case's expression with full = 0
			// and part = z, without its roundings.
			sum += (z*t - (z*off + z*(z-1)/2)) / w
			continue
		}
		full := clampF(math.Floor(t-w)-off+1, 0, z)   // j ≤ t - w: probability 1
		part := clampF(math.Ceil(t)-off, 0, z) - full // t - w < j < t
		if part > 0 {
			j0 := off + full // first partial input; the partial ones are j0 … j0+part-1
			sum += (part*t - (part*j0 + part*(part-1)/2)) / w
		}
		sum += full
	}
	return sum
}

func clampF(x, lo, hi float64) float64 { return min(max(x, lo), hi) }

// ceilInt returns ceil(x) as an int64, saturating far outside the range of
// positions.
func ceilInt(x float64) int64 {
	switch {
	case x <= -1<<62:
		return -1 << 62
	case x >= 1<<62:
		return 1 << 62
	}
	return int64(math.Ceil(x))
}

// sourcesMaxRun is the most inputs of one span whose IDs idsOf follows
// back through the span's shuffle (nprand.ShuffleSources); more take the
// shuffled tail of the span. Measured on 4096-sample spans, random
// positions, medians: 1 input 2.2 vs 4.4 us, 6 inputs 8.3 vs 9.7, 8
// inputs 6.7 vs 6.3, 16 inputs 11.1 vs 6.5.
const sourcesMaxRun = 6

// idsOf writes the sample IDs of node c's inputs sel[k].j into dst[k].
// Each span holding some of them has its shuffle's draws made once, from
// its end down to the lowest of them, and each ID is then found by
// following it back through the partners of the steps after its own
// (nprand's ShuffleSources): no span's IDs are written out and swapped.
func (e *py1e) idsOf(dst []int64, c int, sel []jPos) {
	l := e.l
	ns := l.spanPos[l.nodeSpan[c]]
	order := make([]int32, len(sel))
	for x := range order {
		order[x] = int32(x)
	}
	slices.SortFunc(order, func(u, v int32) int { return cmp.Compare(sel[u].j, sel[v].j) })
	var scratch []uint32
	var at, src []int
	var buf []int64
	for len(order) > 0 {
		// The run of inputs (in ascending j) of one span.
		si := l.spanAt(ns + sel[order[0]].j)
		off, sp := l.spanPos[si]-ns, l.spans[si]
		k := 1
		for k < len(order) && sel[order[k]].j < off+sp.size() {
			k++
		}
		run := order[:k]
		order = order[k:]
		if len(run) > sourcesMaxRun || sp.size() > nprand.MaxSourcesLen {
			// Many inputs of one span (a dense request): one pass over
			// the partners each costs more than shuffling the span's
			// tail once.
			buf = shuffledSpanTail(buf, sp, e.shufCk[si], sel[run[0]].j-off)
			for _, x := range run {
				dst[x] = buf[sel[x].j-off]
			}
			continue
		}
		at, src = at[:0], src[:0]
		for _, x := range run {
			at = append(at, int(sel[x].j-off))
			src = append(src, 0)
		}
		g := e.shufCk[si]
		scratch = g.ShuffleSources(int(sp.size()), at, src, scratch)
		for t, x := range run {
			dst[x] = sp.begin + int64(src[t])
		}
	}
}
