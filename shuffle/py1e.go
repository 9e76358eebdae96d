package shuffle

import (
	"math"
	"sort"
	"sync"
	"sync/atomic"

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
	chunk  int64              // positions per window; 0 means max(1<<22, 4·margin)

	// Nodes are prepared on first use, in order (see ready): nodes
	// [0, prepared) are, and next is the epoch generator after them.
	sparseMu sync.Mutex
	sparse   []*sparseEntry // recently counted ranges, most recent last

	prepMu   sync.Mutex
	prepared atomic.Int32
	next     nprand.Generator
	lo, hi   int64

	// sparseMax is the longest request fillSparse serves (0: the default,
	// sparseDefault; negative: never); sparseSlack, when positive, replaces
	// its first guess's slack (tests force retries and fallbacks with it).
	sparseMax, sparseSlack int64
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
		lo:     lo,
		hi:     hi,
		next:   l.epoch,
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
		e.ready(c)
		e.fillNode(dst[:k], c, pos-ns, pos-ns+k)
		dst = dst[k:]
		pos += k
	}
}

// fillNode writes node c's output positions [lo, hi) (node-relative) into
// dst, in chunks so that memory stays O(chunk + margin).
func (e *py1e) fillNode(dst []int64, c int, lo, hi int64) {
	sm := e.sparseMax
	if sm == 0 {
		sm = sparseDefault
	}
	if hi-lo <= sm && e.fillSparse(dst, c, lo, hi) {
		return
	}
	chunk := e.chunkSize(e.margin[c])
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

// chunkSize returns the window length used for a node with this margin.
func (e *py1e) chunkSize(margin int64) int64 {
	if e.chunk != 0 {
		return e.chunk
	}
	return max(int64(1)<<22, 4*margin)
}

// fillWindow computes node c's output positions [lo, hi).
//
// With every shift bounded by M (margin = 2M+2), consider the input window
// [a, b) = [lo-margin, hi+margin) ∩ [0, m). For a sample of the window whose
// position p lies in [a+M, b-M), all a inputs before the window have smaller
// positions and all inputs after it larger ones, so its output rank is a
// plus its rank within the window. The samples of output ranks [lo, hi) have
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

	// The window's positions are generated twice (count, then gather) in
	// blocks rather than stored: a resume then needs memory for one batch,
	// not for the window.
	pb := make([]float64, min(w, 4096))
	// Window ranks [qlo, qhi) are wanted. A first counting pass over coarse
	// buckets of the integer part of positions (at most ~1024 of them, so
	// the counters stay in cache) finds the buckets holding those ranks;
	// only their samples are gathered, as (position, index) pairs, and each
	// bucket is sorted with a fine counting sort. A resume that needs one batch thus
	// sorts almost nothing; a full window sorts everything in linear time.
	qlo, qhi := lo-a, hi-a
	base := a - mm - 1 // trunc(position) - base >= 0 (clamped below)
	keys := w + 2*mm + 3
	sh := uint(0)
	for keys>>sh >= 1024 {
		sh++
	}
	nbk := keys>>sh + 1
	// Keys only need to be monotone in the position: truncation is (and
	// positions are >= 0 anyway, as shifts never reach below the node start).
	key := func(x float64) int64 {
		return min(max(int64(x)-base, 0), keys-1)
	}
	bstart := make([]int64, nbk+1)
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
	kFirst := int64(sort.Search(int(nbk), func(k int) bool { return bstart[k+1] > qlo }))
	kLast := int64(sort.Search(int(nbk), func(k int) bool { return bstart[k+1] >= qhi }))
	off0 := bstart[kFirst]
	pairs := make([]posIdx, bstart[kLast+1]-off0)
	next := make([]int64, kLast-kFirst+1)
	for k := range next {
		next[k] = bstart[kFirst+int64(k)] - off0
	}
	sortBuckets := func() {
		var tmp []posIdx
		var cnt []int32
		for k := kFirst; k <= kLast; k++ {
			b := pairs[bstart[k]-off0 : bstart[k+1]-off0]
			tmp, cnt = sortBucket(b, tmp, cnt, base+k<<sh, int64(1)<<sh)
		}
	}
	if (qhi-qlo)*4 >= w && l.n <= math.MaxInt32 {
		// Dense request: gather (position, index, sample ID) span by span,
		// shuffling each span once, so the sorted pairs carry their IDs and
		// no random lookups are needed afterwards.
		var buf []int64
		for i := l.spanAt(ns + a); i < last && l.spanPos[i]-ns < b; i++ {
			off := l.spanPos[i] - ns
			from, to := max(off, a), min(off+l.spans[i].size(), b)
			if to <= from {
				continue
			}
			buf = shuffledSpanTail(buf, l.spans[i], e.shufCk[i], from-off)
			g := e.uniCk[i]
			g.Advance(uint64(from - off))
			lb, width := e.low[i], e.width[i]
			for j := from; j < to; j++ {
				// Same expression as positions.
				x := float64(j) + (lb + float64(width*g.Float64()))
				if k := key(x)>>sh - kFirst; k >= 0 && k < int64(len(next)) {
					pairs[next[k]] = posIdx{x, int32(j - a), int32(buf[j-off])}
					next[k]++
				}
			}
		}
		sortBuckets()
		for x, v := range pairs[qlo-off0 : qhi-off0] {
			dst[x] = int64(v.id)
		}
		return
	}
	for j := a; j < b; j += int64(len(pb)) {
		pk := pb[:min(int64(len(pb)), b-j)]
		e.positions(pk, c, j)
		for t, x := range pk {
			if k := key(x)>>sh - kFirst; k >= 0 && k < int64(len(next)) {
				pairs[next[k]] = posIdx{p: x, t: int32(j - a + int64(t))}
				next[k]++
			}
		}
	}
	sortBuckets()
	sel := pairs[qlo-off0 : qhi-off0]

	// Sample IDs: each selected input j needs its span's shuffle.
	jmin, jmax := int64(math.MaxInt64), int64(-1)
	for _, x := range sel {
		j := a + int64(x.t)
		jmin, jmax = min(jmin, j), max(jmax, j)
	}
	var buf []int64
	if int64(len(sel))*16 >= jmax-jmin+1 {
		// Dense: shuffle every span of [jmin, jmax].
		cand := make([]int64, jmax-jmin+1)
		for i := l.spanAt(ns + jmin); i < last && l.spanPos[i]-ns <= jmax; i++ {
			off := l.spanPos[i] - ns
			z := l.spans[i].size()
			if z == 0 {
				continue
			}
			from, to := max(off, jmin), min(off+z, jmax+1)
			buf = shuffledSpanTail(buf, l.spans[i], e.shufCk[i], from-off)
			copy(cand[from-jmin:to-jmin], buf[from-off:to-off])
		}
		for x, v := range sel {
			dst[x] = cand[a+int64(v.t)-jmin]
		}
		return
	}
	// Sparse (a few samples spread over a wide window): shuffle only the
	// spans that hold selected inputs.
	order := make([]int32, len(sel))
	for x := range order {
		order[x] = int32(x)
	}
	sort.Slice(order, func(u, v int) bool { return sel[order[u]].t < sel[order[v]].t })
	si := -1
	for _, x := range order {
		j := a + int64(sel[x].t)
		if si < 0 || l.spanPos[si+1]-ns <= j {
			si = l.spanAt(ns + j) // first selected input of the span
			buf = shuffledSpanTail(buf, l.spans[si], e.shufCk[si], j-(l.spanPos[si]-ns))
		}
		dst[x] = buf[j-(l.spanPos[si]-ns)]
	}
}

// positions writes the sort positions of node c's inputs [j, j+len(dst))
// (node-relative): j + shift, the shift drawn from the input's span.
func (e *py1e) positions(dst []float64, c int, j int64) {
	l := e.l
	ns := l.spanPos[l.nodeSpan[c]]
	i := l.spanAt(ns + j)
	for len(dst) > 0 {
		off := l.spanPos[i] - ns
		k := min(int64(len(dst)), off+l.spans[i].size()-j)
		if k > 0 {
			g := e.uniCk[i]
			g.Advance(uint64(j - off))
			lb, width := e.low[i], e.width[i]
			g.FillFloat64(dst[:k])
			for t, v := range dst[:k] {
				dst[t] = float64(j+int64(t)) + (lb + float64(width*v))
			}
			dst = dst[k:]
			j += k
		}
		i++
	}
}

// posIdx is a sample's position, its index in the evaluation window and,
// on the dense path, its sample ID (which then fits in int32).
type posIdx struct {
	p  float64
	t  int32
	id int32
}

// sortBucket sorts b by (position, index), given that every
// trunc(position) - base of b lies in [0, nkeys) after clamping: a stable counting sort on
// that key (b arrives in index order), then an insertion sort for samples
// sharing a key. tmp and cnt are scratch buffers, returned for reuse.
func sortBucket(b, tmp []posIdx, cnt []int32, base, nkeys int64) ([]posIdx, []int32) {
	key := func(x float64) int64 {
		return min(max(int64(x)-base, 0), nkeys-1)
	}
	if len(b) < 48 {
		insertionSort(b)
		return tmp, cnt
	}
	if int64(cap(cnt)) < nkeys+1 {
		cnt = make([]int32, nkeys+1)
	}
	cnt = cnt[:nkeys+1]
	clear(cnt)
	for _, x := range b {
		cnt[key(x.p)+1]++
	}
	for k := int64(1); k <= nkeys; k++ {
		cnt[k] += cnt[k-1]
	}
	if cap(tmp) < len(b) {
		tmp = make([]posIdx, len(b))
	}
	tmp = tmp[:len(b)]
	for _, x := range b {
		k := key(x.p)
		tmp[cnt[k]] = x
		cnt[k]++
	}
	copy(b, tmp)
	insertionSort(b) // keys are now in order: this only fixes ties of a key
	return tmp, cnt
}

func insertionSort(b []posIdx) {
	for x := 1; x < len(b); x++ {
		v := b[x]
		y := x
		for ; y > 0 && (b[y-1].p > v.p || b[y-1].p == v.p && b[y-1].t > v.t); y-- {
			b[y] = b[y-1]
		}
		b[y] = v
	}
}
