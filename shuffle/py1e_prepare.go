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
	if int(e.prepared.Load()) > c {
		return
	}
	e.prepMu.Lock()
	defer e.prepMu.Unlock()
	for n := int(e.prepared.Load()); n <= c; n++ {
		e.prepareNode(n)
		e.prepared.Store(int32(n + 1))
	}
}

// prepareNode draws node c's span checkpoints, shift windows and margin
// from e.next and leaves e.next after them.
func (e *py1e) prepareNode(c int) {
	l := e.l
	lo, hi := e.lo, e.hi
	g := e.next
	first, last := l.nodeSpan[c], l.nodeSpan[c+1]
	// One run over the node's spans (the vector kernel's lanes go on from
	// span to span), recording each span's checkpoint.
	g.SkipShuffles(last-first, func(k int) int { return int(l.spans[first+k].size()) },
		func(k int, h nprand.Generator) { e.shufCk[first+k] = h })
	m := l.spanPos[last] - l.spanPos[first]
	var off int64
	var maxShift float64
	var jump nprand.Jump // the spans' uniform draws: mostly one size
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
		if i == first || uint64(z) != jump.Steps() {
			jump = g.JumpOf(uint64(z))
		}
		g.AdvanceJump(&jump)
		maxShift = max(maxShift, -lb, ub)
		off += z
	}
	// Every shift lies in [-maxShift, maxShift] (up to rounding), so a
	// sample at node index j ends up at a position within M of j.
	mm := int64(math.Ceil(maxShift)) + 1
	e.margin[c] = 2*mm + 2
	e.next = g
}

// marginBound bounds every node's margin without preparing any: a shift
// is at most (hi-2)/2.
func (e *py1e) marginBound() int64 {
	return 2*((e.hi-2)/2+2) + 2
}
