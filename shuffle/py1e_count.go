package shuffle

import (
	"cmp"
	"math"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/sluicedata/sluice/nprand"
)

// jPos is an input's sort position and its node-relative index.
type jPos struct {
	p float64
	j int64
}

// countKeep returns the number of node c's inputs with position < x0 and
// appends to kept those with position in [x0, x1), in input order.
//
// The spans are independent (each has its own generator checkpoint), so
// a long range is counted on several goroutines, in runs of spans taken
// in turn, and the results joined in span order: the same answer, sooner.
func (e *py1e) countKeep(c int, x0, x1 float64, kept []jPos) (int64, []jPos) {
	l := e.l
	first, last := l.nodeSpan[c], l.nodeSpan[c+1]
	ns := l.spanPos[first]
	// The spans with draws to make: positions reach about margin/2 from j.
	mm := float64((e.margin[c]-2)/2) + 2
	lo := sort.Search(last-first, func(k int) bool { return float64(l.spanPos[first+k+1]-ns) > x0-mm }) + first
	hi := sort.Search(last-first, func(k int) bool { return float64(l.spanPos[first+k]-ns) >= x1+mm }) + first
	hi = max(hi, lo)
	below := l.spanPos[lo] - ns // spans before lo lie wholly below x0
	par := runtime.GOMAXPROCS(0)
	if draws := l.spanPos[hi] - l.spanPos[lo]; par < 2 || hi-lo < 2*par || draws < 1<<18 {
		n, k := e.countSpans(lo, hi, ns, x0, x1, kept)
		return below + n, k
	}
	// Chunks of spans taken in turn by the caller and par-1 goroutines:
	// when another process holds a core, the others take over its share
	// instead of waiting for a fixed half (measured: fixed halves made
	// the resume slower on two loaded cores than on one).
	type part struct {
		n    int64
		kept []jPos
	}
	chunks := min(hi-lo, 8*par)
	parts := make([]part, chunks)
	var next atomic.Int64
	work := func() {
		for {
			k := int(next.Add(1) - 1)
			if k >= chunks {
				return
			}
			a, b := lo+(hi-lo)*k/chunks, lo+(hi-lo)*(k+1)/chunks
			parts[k].n, parts[k].kept = e.countSpans(a, b, ns, x0, x1, make([]jPos, 0, cap(kept)/chunks+64))
		}
	}
	var wg sync.WaitGroup
	for range par - 1 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			work()
		}()
	}
	work()
	wg.Wait()
	for _, pt := range parts {
		below += pt.n
		kept = append(kept, pt.kept...)
	}
	return below, kept
}

// countSpans is countKeep over spans [from, to) of a node starting at
// ns.
func (e *py1e) countSpans(from, to int, ns int64, x0, x1 float64, kept []jPos) (int64, []jPos) {
	l := e.l
	var below int64
	var hits []nprand.LineHit
	for i := from; i < to; i++ {
		off := l.spanPos[i] - ns
		z := l.spans[i].size()
		if z == 0 {
			continue
		}
		lb, width := e.low[i], e.width[i]
		ub := lb + width
		// Positions are j + shift with shift in [lb, ub] up to rounding;
		// a slack of 1 covers the rounding many times over.
		jb := min(max(ceilInt(x0-ub-1), off), off+z) // inputs before jb: certainly below x0
		ja := min(max(ceilInt(x1-lb+1), jb), off+z)  // inputs from ja: certainly ≥ x1
		below += jb - off
		if jb == ja {
			continue
		}
		g := e.uniCk[i]
		g.Advance(uint64(jb - off))
		var n int64
		if n, kept, hits = countLine(g, jb, ja, lb, width, x0, x1, kept, hits); n < 0 {
			n, kept = countFloat(g, jb, ja, lb, width, x0, x1, kept)
		}
		below += n
	}
	return below, kept
}

// countFloat counts the inputs j in [jb, ja) of a span whose position
// (j + lb + width·u, u drawn from g in turn) is below x0, and appends those
// in [x0, x1) to kept.
func countFloat(g nprand.Generator, jb, ja int64, lb, width, x0, x1 float64, kept []jPos) (int64, []jPos) {
	var below int64
	var u [countChunk]float64
	var in [countChunk]int32
	for j := jb; j < ja; j += int64(len(u)) {
		uk := u[:min(int64(len(u)), ja-j)]
		g.FillFloat64(uk)
		var nk int
		below, nk = countBelow(uk, j, lb, width, x0, x1, below, &in)
		for _, t := range in[:nk] {
			// Same expression as positions.
			x := float64(j+int64(t)) + (lb + float64(width*uk[t]))
			kept = append(kept, jPos{x, j + int64(t)})
		}
	}
	return below, kept
}

// countLine is countFloat on integers: the position j + (lb + width·u)
// is non-decreasing in the draw's 53 bits r (u = r·2^-53, and rounding
// never reverses an order), so "below x0" is r below a threshold that
// falls by about 2^53/width per input. nprand's CountLine compares the
// draws with that line as it makes them; the draws within a margin of it
// (which covers every rounding of the position and of the line many times
// over, yet is about 2^-32 of the draws' range) or between the x0 and x1
// lines come back as hits and are resolved with the position's own
// floating-point expression. It reports -1 when the line would not fit in
// integers (tiny widths); countFloat serves those.
func countLine(g nprand.Generator, jb, ja int64, lb, width, x0, x1 float64, kept []jPos, hits []nprand.LineHit) (int64, []jPos, []nprand.LineHit) {
	n := ja - jb
	step := 0x1p53 / width
	if !(width >= 1) || n > 1<<30 { // (n fits an int everywhere)
		return -1, kept, hits
	}
	x1 = max(x1, x0)
	k0f := (x0 - lb - float64(jb)) * step
	k1f := (x1 - lb - float64(jb)) * step
	// Rounding of the position (three operations on magnitudes below mag)
	// and of k0f, k1f and the integer slope, with a wide safety factor.
	mag := math.Abs(x0) + math.Abs(x1) + math.Abs(lb) + math.Abs(float64(ja)) + width
	marginF := 0x1p-44*mag*step + 2*float64(n) + 1<<20
	if !(math.Abs(k0f)+math.Abs(k1f)+2*marginF+float64(n)*(step+1) < 0x1p61) {
		return -1, kept, hits
	}
	s := int64(math.Round(step))
	k0, k1 := int64(math.Round(k0f)), int64(math.Round(k1f))
	margin := int64(marginF)
	nb, hits := g.CountLine(int(n), k0, s, margin, k1-k0+margin, hits[:0])
	below := int64(nb)
	for _, h := range hits {
		j := jb + int64(h.T)
		// Same expressions as Float64 and positions.
		v := float64(int64(h.Value)) * (1.0 / 9007199254740992.0)
		x := float64(j) + (lb + float64(width*v))
		fast := int64(h.Value) < k0-int64(h.T)*s // what CountLine counted
		below += int64(b2i(x < x0) - b2i(fast))
		if x >= x0 && x < x1 {
			kept = append(kept, jPos{x, j})
		}
	}
	return below, kept, hits
}

// countBelow adds to below the number of the positions j+t + (lb +
// width·u[t]) that lie below x0, and writes the indices t of those in
// [x0, x1) to in, returning their number. It has no branches: which side
// of x0 a position falls is unpredictable.
//
// The index is converted per draw (float64(j+t)) rather than carried in a
// float counter: a float add per draw would chain every iteration to the
// previous one through its four-cycle latency.
func countBelow(u []float64, j int64, lb, width, x0, x1 float64, below int64, in *[countChunk]int32) (int64, int) {
	// n0 counts the positions below x0 and n1 those below x1 (x1 >= x0,
	// so n1 - n0 is the number kept so far).
	x1 = max(x1, x0)
	var n0, n1 int
	for t, v := range u[:min(len(u), countChunk)] {
		// Same expression as positions (float64(j+t) is exact below 2^53).
		x := float64(j+int64(t)) + (lb + float64(width*v))
		in[(n1-n0)&(countChunk-1)] = int32(t)
		n0 += b2i(x < x0)
		n1 += b2i(x < x1)
	}
	return below + int64(n0), n1 - n0
}

// countChunk is the number of draws countSpans makes at a time.
const countChunk = 512

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// selectKept returns the entries of ranks [a, b) of sortKept(kept, x0,
// x1) (0 <= a <= b <= len(kept)), in that order, without sorting the
// others. A resume's first request wants a batch or a few of the ~20k
// entries its count keeps. kept is not modified.
//
// It first tries selectGuess (one pass), then counts coarse keys
// (selectCounted, two passes).
func selectKept(kept []jPos, x0, x1 float64, a, b int) []jPos {
	if sel, ok := selectGuess(kept, x0, x1, a, b); ok {
		return sel
	}
	return selectCounted(kept, x0, x1, a, b)
}

// selectGuess is selectKept in one pass over kept, for positions spread
// about evenly over [x0, x1) (as a count's kept inputs are, away from a
// node's edges): it guesses positions pa < pb around ranks [a, b) from
// that density, with a margin of several times the deviation of a count
// of uniform positions, counts the entries below pa and gathers those in
// [pa, pb) (in input order). Every entry below pa comes before them in
// sortKept's order and every entry from pb on after, so when at most a
// lie below pa and at least b below pb the gathered entries, sorted as
// sortKept sorts, hold ranks [a, b) exactly. It reports false otherwise
// (the positions were not even enough), or when there is little to gain.
func selectGuess(kept []jPos, x0, x1 float64, a, b int) ([]jPos, bool) {
	n := len(kept)
	if n < 1024 || b-a > n/8 || !(x1 > x0) {
		return nil, false
	}
	per := (x1 - x0) / float64(n) // positions per entry
	m := 4*math.Sqrt(float64(n)) + 64
	pa := x0 + (float64(a)-m)*per
	pb := x0 + (float64(b)+m)*per
	if !(pa < pb) {
		return nil, false
	}
	// Room for the expected gathering and a little more; more than that
	// means the guess is off (uneven positions): give up. Without
	// branches on the positions (which side of pa and pb an entry lies
	// is unpredictable): every entry is written at the gathered count,
	// which only the gathered ones advance (the last slot takes the
	// overflow, if any, and the count then tells).
	sel := make([]jPos, int(float64(b-a)+2*m)*5/4+64)
	last := len(sel) - 1
	below, got := 0, 0
	for _, x := range kept {
		below += b2i(x.p < pa)
		sel[min(got, last)] = x
		got += b2i(x.p >= pa) & b2i(x.p < pb)
	}
	if got > last || below > a || below+got < b {
		return nil, false
	}
	sel = sortKept(sel[:got], pa, pb)
	return sel[a-below : b-below], true
}

// selectCounted is selectKept by counting: coarse keys of the positions
// are counted (1024 of them, in the order of sortKept's), and only the
// entries of the keys that hold ranks [a, b) are gathered (in input
// order) and sorted as sortKept sorts.
func selectCounted(kept []jPos, x0, x1 float64, a, b int) []jPos {
	n := len(kept)
	nb := min(n, 1024) // coarse keys: the counters stay in L1
	scale := float64(nb) / (x1 - x0)
	if n < 64 || !(scale > 0) || math.IsInf(scale, 0) {
		return sortKept(slices.Clone(kept), x0, x1)[a:b]
	}
	if b == a {
		return nil
	}
	// key is monotone in p (as sortKept's, with fewer keys).
	key := func(p float64) int { return min(max(int((p-x0)*scale), 0), nb-1) }
	var cnt [1025]int32
	for _, x := range kept {
		cnt[key(x.p)+1]++
	}
	var sum int32
	for k, c := range cnt[:nb+1] {
		sum += c
		cnt[k] = sum
	}
	// cnt[k] is now the first rank of key k.
	kFirst := sort.Search(nb, func(k int) bool { return int(cnt[k+1]) > a })
	kLast := sort.Search(nb, func(k int) bool { return int(cnt[k+1]) >= b })
	first := int(cnt[kFirst])
	sel := make([]jPos, 0, int(cnt[kLast+1])-first)
	for _, x := range kept {
		if k := key(x.p); k >= kFirst && k <= kLast {
			sel = append(sel, x)
		}
	}
	// sortKept's order on the gathered entries (any bounds give its
	// order; these spread them over its keys).
	sel = sortKept(sel, x0+float64(kFirst)/scale, x0+float64(kLast+1)/scale)
	return sel[a-first : b-first]
}

// sortKept returns kept, whose entries come in ascending j with positions
// in [x0, x1), sorted by (position, j): a stable counting sort on about
// len(kept) equal slices of [x0, x1) into a new slice, which it returns
// (short inputs are sorted in place instead), then an insertion sort of
// each slice's few entries (stable, so equal positions stay in j order). It
// replaces a comparison sort of the ~20k entries a resume keeps.
func sortKept(kept []jPos, x0, x1 float64) []jPos {
	n := len(kept)
	scale := float64(n) / (x1 - x0)
	if n < 64 || !(scale > 0) || math.IsInf(scale, 0) {
		slices.SortStableFunc(kept, func(u, v jPos) int { return cmp.Compare(u.p, v.p) })
		return kept
	}
	// key is monotone in p: a float subtraction and multiplication by a
	// positive constant never reverse an order, nor does truncation.
	key := func(p float64) int { return min(max(int((p-x0)*scale), 0), n-1) }
	cnt := make([]int32, n+1)
	for _, x := range kept {
		cnt[key(x.p)+1]++
	}
	// The running sum in a register: summing in memory makes each step
	// wait for the previous one's store.
	var sum int32
	for k, c := range cnt {
		sum += c
		cnt[k] = sum
	}
	tmp := make([]jPos, n)
	for _, x := range kept {
		k := key(x.p)
		tmp[cnt[k]] = x
		cnt[k]++
	}
	// cnt[k] is now the end of slice k; sort each slice in place.
	start := 0
	for _, c := range cnt[:n] {
		end := int(c)
		if end-start < 2 {
			start = end
			continue
		}
		b := tmp[start:end]
		for a := 1; a < len(b); a++ {
			v := b[a]
			y := a
			for ; y > 0 && b[y-1].p > v.p; y-- {
				b[y] = b[y-1]
			}
			b[y] = v
		}
		start = end
	}
	return tmp
}
