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
		for j := jb; j < ja; j++ {
			// Same expression as positions.
			x := float64(j) + (lb + float64(width*g.Float64()))
			if x < x0 {
				below++
			} else if x < x1 {
				kept = append(kept, jPos{x, j})
			}
		}
	}
	return below, kept
}
