package shuffle

import (
	"math"

	"github.com/sluicedata/sluice/nprand"
)

// ready prepares canonical nodes [0, c] if they are not yet. The epoch
// generator runs through the nodes in order, so node c needs every node
// before it, but none after it: the first batch of a low node does not
// wait for the whole epoch's preparation.
func (e *py1e) ready(c int) {
	e.readyFor(c, -1, 0)
}

// readyFor is ready for a request of node c's ranks [rel, rel+n)
// (node-relative; rel < 0: none known): when that request prepares node
// c and is short (the sparse path's), the draws of its count are made
// during the node's skip on another goroutine (py1e_ahead.go).
func (e *py1e) readyFor(c int, rel, n int64) {
	if int(e.prepared.Load()) > c {
		return
	}
	sm := e.sparseMax
	if sm == 0 {
		sm = sparseDefault
	}
	if n > sm {
		rel = -1
	}
	e.prepMu.Lock()
	defer e.prepMu.Unlock()
	for k := int(e.prepared.Load()); k <= c; k++ {
		if k == c && rel >= 0 {
			e.prepareNode(k, rel, n)
		} else {
			e.prepareNode(k, -1, 0)
		}
		e.prepared.Store(int32(k + 1))
	}
}

// prepareNode draws node c's span checkpoints, shift windows and margin
// from e.next and leaves e.next after them. For a request of ranks [rel,
// rel+n) (rel >= 0) it also starts the draws of that request's count
// (startAhead) and records where its spans' draws lie in them.
func (e *py1e) prepareNode(c int, rel, n int64) {
	l := e.l
	lo, hi := e.lo, e.hi
	g := e.next
	first, last := l.nodeSpan[c], l.nodeSpan[c+1]
	var run *aheadRun
	if rel >= 0 {
		run = e.startAhead(c, g, rel, n)
	}
	// One run over the node's spans (the vector kernel's lanes go on from
	// span to span), recording each span's checkpoint.
	g.SkipShuffles(last-first, func(k int) int { return int(l.spans[first+k].size()) },
		func(k int, h nprand.Generator) { e.shufCk[first+k] = h })
	m := l.spanPos[last] - l.spanPos[first]
	var off int64
	var maxShift float64
	var jump nprand.Jump         // the spans' uniform draws: mostly one size
	at, known := int64(0), false // the index in run of g's next draw
	if run != nil {
		if a := run.run.Load(); a != nil {
			at, known = a.Index(g)
		}
	}
	for i := first; i < last; i++ {
		z := l.spans[i].size()
		pg := g
		r := lo + int64(g.Bounded(uint64(hi-1-lo)))
		if run != nil {
			d := pg.StepsTo(g, 8)
			known = known && d >= 0
			at += int64(d)
			run.pos[i-first] = at
			run.known[i-first] = known
		}
		cut := float64(r-z) / 2
		if cut < 0 {
			cut = 0
		}
		lb := max(-cut, -float64(off))
		ub := min(cut, float64(m-off-z))
		e.low[i], e.width[i] = lb, ub-lb
		e.uniCk[i] = g
		if i == first || uint64(z) != jump.Steps() {
			jump = g.JumpOf(uint64(z))
		}
		g.AdvanceJump(&jump)
		at += z
		maxShift = max(maxShift, -lb, ub)
		off += z
	}
	// Every shift lies in [-maxShift, maxShift] (up to rounding), so a
	// sample at node index j ends up at a position within M of j.
	mm := int64(math.Ceil(maxShift)) + 1
	e.margin[c] = 2*mm + 2
	e.next = g
	if run != nil {
		if old := e.ahead.Swap(run); old != nil {
			old.stop()
		}
	}
}

// marginBound bounds every node's margin without preparing any: a shift
// is at most (hi-2)/2.
func (e *py1e) marginBound() int64 {
	return 2*((e.hi-2)/2+2) + 2
}
