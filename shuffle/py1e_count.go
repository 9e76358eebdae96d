package shuffle

import (
	"runtime"
	"sort"
	"sync"
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
// a long range is counted on several goroutines, a run of spans each, and
// the results joined in span order: the same answer, sooner.
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
	type part struct {
		n    int64
		kept []jPos
	}
	parts := make([]part, par)
	var wg sync.WaitGroup
	for p := range par {
		a, b := lo+(hi-lo)*p/par, lo+(hi-lo)*(p+1)/par
		wg.Add(1)
		go func() {
			defer wg.Done()
			parts[p].n, parts[p].kept = e.countSpans(a, b, ns, x0, x1, nil)
		}()
	}
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
	var u [countChunk]float64
	var in [countChunk]int32
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
	}
	return below, kept
}

// countBelow adds to below the number of the positions j+t + (lb +
// width·u[t]) that lie below x0, and writes the indices t of those in
// [x0, x1) to in, returning their number. It has no branches: which side
// of x0 a position falls is unpredictable.
func countBelow(u []float64, j int64, lb, width, x0, x1 float64, below int64, in *[countChunk]int32) (int64, int) {
	var nb, nk int
	fj := float64(j)
	for t, v := range u[:min(len(u), countChunk)] {
		// Same expression as positions (float64(j) is exact for j < 2^53).
		x := fj + (lb + float64(width*v))
		fj++
		lt := b2i(x < x0)
		nb += lt
		in[nk&(countChunk-1)] = int32(t)
		nk += b2i(x < x1) &^ lt
	}
	return below + int64(nb), nk
}

// countChunk is the number of draws countSpans makes at a time.
const countChunk = 512

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
