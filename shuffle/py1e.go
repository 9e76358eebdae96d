package shuffle

import (
	"cmp"
	"math"
	"slices"
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
	sparse   []sparseEntry // recently counted ranges, most recent last

	prepMu   sync.Mutex
	prepared atomic.Int32
	next     nprand.Generator
	lo, hi   int64

	// sparseMax is the longest request fillSparse serves (0: the default,
	// sparseDefault; negative: never); sparseSlack, when positive, replaces
	// its first guess's slack (tests force retries and fallbacks with it).
	sparseMax, sparseSlack int64
}

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
// [below, below+len(kept)) in rank order.
type sparseEntry struct {
	c     int
	below int64
	kept  []jPos
}

// sparseCached returns the inputs of node c's output ranks [lo, hi) from
// a counted range, if one holds them.
func (e *py1e) sparseCached(c int, lo, hi int64) ([]jPos, bool) {
	e.sparseMu.Lock()
	var hit *sparseEntry
	for i := range e.sparse {
		s := &e.sparse[i]
		if s.c == c && s.below <= lo && s.below+int64(len(s.kept)) >= hi {
			hit = s
			break
		}
	}
	var sel []jPos
	if hit != nil {
		sel = hit.kept[lo-hit.below : hi-hit.below] // entries are never modified
	}
	e.sparseMu.Unlock()
	return sel, hit != nil
}

func (e *py1e) sparseStore(c int, below int64, kept []jPos) {
	e.sparseMu.Lock()
	defer e.sparseMu.Unlock()
	if len(e.sparse) == sparseKeep {
		e.sparse = slices.Delete(e.sparse, 0, 1)
	}
	e.sparse = append(e.sparse, sparseEntry{c, below, kept})
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
	x0, x1 := e.expectedPos(c, float64(wlo-d)), e.expectedPos(c, float64(whi+d))
	var kept []jPos
	for range 3 {
		var below int64
		below, kept = e.countKeep(c, x0, x1, kept[:0])
		n := int64(len(kept))
		if below <= lo && below+n >= hi {
			sortKept(kept, x0, x1)
			e.sparseStore(c, below, kept)
			return kept[lo-below : hi-below], true
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
// number of node c's inputs with a smaller position is about r: the
// expectation is a sum over spans of closed forms (shifts are uniform in
// [lb, ub]), increasing in x, inverted by bisection. Near a node's edges the
// shift ranges are clipped and positions drift from ranks; this keeps the
// guess of fillSparse centred there too.
func (e *py1e) expectedPos(c int, r float64) float64 {
	l := e.l
	m := float64(l.spanPos[l.nodeSpan[c+1]] - l.spanPos[l.nodeSpan[c]])
	if r <= 0 || r >= m {
		return r
	}
	mm := float64((e.margin[c] - 2) / 2)
	lo, hi := r-mm-2, r+mm+2
	for hi-lo > 0.5 {
		mid := (lo + hi) / 2
		if e.expectedBelow(c, mid) < r {
			lo = mid
		} else {
			hi = mid
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

// idsOf writes the sample IDs of node c's inputs sel[k].j into dst[k],
// shuffling each span that holds one of them once.
func (e *py1e) idsOf(dst []int64, c int, sel []jPos) {
	l := e.l
	ns := l.spanPos[l.nodeSpan[c]]
	order := make([]int32, len(sel))
	for x := range order {
		order[x] = int32(x)
	}
	slices.SortFunc(order, func(u, v int32) int { return cmp.Compare(sel[u].j, sel[v].j) })
	var buf []int64
	si := -1
	for _, x := range order {
		j := sel[x].j
		if si < 0 || l.spanPos[si+1]-ns <= j {
			// The span's first selected input (they come in ascending
			// j): only the shuffle's tail from there is needed.
			si = l.spanAt(ns + j)
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
