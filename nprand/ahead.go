package nprand

import (
	"math/bits"
	"sync/atomic"
)

// Ahead is a run of a stream's 64-bit draws made in advance, for
// CountLine: it keeps the top 16 bits of each draw's 53-bit value (the
// bits Float64 scales) and the state of every aheadEvery-th draw, from
// which any draw is remade exactly with one multiply.
//
// It exists for a count whose draws are known before where they go: a py1e
// resume counts draws that follow the epoch's span shuffles, so which
// draw meets which line depends on how many draws the shuffles took
// (known only after a 6 ms skip), but the draws themselves do not. A
// second core makes them during the skip (Fill), and the count then
// compares 2 bytes a draw with its lines, remaking only the draws whose
// top bits do not decide (about one in 500 there), instead of making
// every draw after the skip.
//
// Fill and Stop may run concurrently with Index and CountLine; CountLine
// uses only draws Fill has finished and never waits for Fill.
type Ahead struct {
	base, inc u128
	n         int
	top       []uint16 // allocated by Fill
	ck        []u128   // ck[b]: the state whose output is draw b·aheadEvery
	jm, jc    [aheadEvery]u128
	done      atomic.Int64 // draws [0, done) are filled
	stop      atomic.Bool
}

const (
	aheadEvery = 64      // draws per kept state
	aheadChunk = 1 << 15 // draws Fill publishes at a time
	aheadShift = 37      // 53-bit values keep their top 16 bits
)

// NewAhead returns a run of n of g's next 64-bit draws (draw t is what
// the (t+1)-th call of Uint64 would return), not yet made: Fill makes
// them, in 2 bytes a draw and 16 bytes per aheadEvery draws.
func NewAhead(g Generator, n int) *Ahead {
	n = max(n, 0)
	a := &Ahead{base: g.state, inc: g.inc, n: n}
	// jm[k]·x + jc[k] is k steps from x.
	m, c := u128{0, 1}, u128{}
	for k := range a.jm {
		a.jm[k], a.jc[k] = m, c
		m, c = mul128(m, pcgMult), add128(mul128(c, pcgMult), g.inc)
	}
	return a
}

// Len returns the number of draws in the run.
func (a *Ahead) Len() int { return a.n }

// Filled returns the number of draws made so far (from the first on).
func (a *Ahead) Filled() int { return int(a.done.Load()) }

// Stop makes Fill return after the chunk it is making.
func (a *Ahead) Stop() { a.stop.Store(true) }

// Fill makes the run's draws in order, publishing them a chunk at a time,
// until all are made or Stop is called. Call it once.
func (a *Ahead) Fill() {
	n := a.n
	if a.top == nil {
		// Here, not in NewAhead: the allocation (and the pages' first
		// touch) is the filling goroutine's cost.
		a.top = make([]uint16, n)
		a.ck = make([]u128, (n+aheadEvery-1)/aheadEvery)
	}
	for from := 0; from < n && !a.stop.Load(); {
		to := min(from+aheadChunk, n)
		a.fillFrom(from, to)
		a.done.Store(int64(to))
		from = to
	}
}

// fillFrom makes draws [from, to) (from a multiple of aheadEvery, after
// the draws before it).
func (a *Ahead) fillFrom(from, to int) {
	s := add128(mul128(a.base, pcgMult), a.inc) // the state of draw 0
	if from > 0 {
		s = add128(mul128(a.jm[aheadEvery-1], a.ck[from/aheadEvery-1]), a.jc[aheadEvery-1])
		s = add128(mul128(s, pcgMult), a.inc)
	}
	fillTop(a.top[from:to], a.ck[from/aheadEvery:], s, a.inc)
}

// fillTopScalar writes the top 16 bits of the 53-bit values of the draws whose
// first state is s into top (whose length is a multiple of aheadEvery
// unless it is the run's last chunk), and each aheadEvery-th draw's state
// into ck, returning the state of the next draw.
func fillTopScalar(top []uint16, ck []u128, s, inc u128) u128 {
	for b := 0; b*aheadEvery < len(top); b++ {
		ck[b] = s
		blk := top[b*aheadEvery : min((b+1)*aheadEvery, len(top))]
		for t := range blk {
			blk[t] = uint16(aheadOut(s) >> (11 + aheadShift))
			s = add128(mul128(s, pcgMult), inc)
		}
	}
	return s
}

// value returns draw t's 53-bit value, remade from the kept state.
func (a *Ahead) value(t int64) uint64 {
	k := t % aheadEvery
	s := add128(mul128(a.jm[k], a.ck[t/aheadEvery]), a.jc[k])
	return aheadOut(s) >> 11
}

// aheadOut is PCG64's output function (XSL-RR) of a state.
func aheadOut(s u128) uint64 {
	return bits.RotateLeft64(s.hi^s.lo, -int(s.hi>>58))
}

// Index returns the index in the run of g's next 64-bit draw: the number
// of steps from the run's start to g's state, negative when g is before
// the start. It reports false when g is on another stream or 2^63 steps
// or more from the start. g's buffered 32-bit half plays no part.
func (a *Ahead) Index(g Generator) (int64, bool) {
	if g.inc != a.inc {
		return 0, false
	}
	d := lcgDistance(a.base, g.state, a.inc)
	switch {
	case d.hi == 0 && d.lo < 1<<63:
		return int64(d.lo), true
	case d.hi == ^uint64(0) && d.lo >= 1<<63:
		return int64(d.lo), true // two's complement: d - 2^128
	}
	return 0, false
}

// StepsTo returns the number of 64-bit steps, at most max, from g's
// state to h's (of one stream), or -1 when h is not that few steps on.
// The buffered 32-bit halves play no part.
func (g Generator) StepsTo(h Generator, max int) int {
	if g.inc != h.inc {
		return -1
	}
	s := g.state
	for d := 0; d <= max; d++ {
		if s == h.state {
			return d
		}
		s = add128(mul128(s, pcgMult), g.inc)
	}
	return -1
}

// lcgDistance returns the number of PCG64 steps (with increment inc) from
// state from to state to, mod 2^128. Bit b of the distance is settled at
// round b: 2^b steps leave the state's bits below b as they are and flip
// bit b (the LCG's period mod 2^(b+1) is 2^(b+1)), so the walk takes them
// exactly when bit b still differs.
func lcgDistance(from, to, inc u128) u128 {
	var d u128
	m, c := pcgMult, inc // the map of 2^b steps
	for b := uint(0); b < 128 && from != to; b++ {
		var bit u128
		if b < 64 {
			bit.lo = 1 << b
		} else {
			bit.hi = 1 << (b - 64)
		}
		if (from.lo^to.lo)&bit.lo != 0 || (from.hi^to.hi)&bit.hi != 0 {
			from = add128(mul128(m, from), c)
			d.lo |= bit.lo
			d.hi |= bit.hi
		}
		c = mul128(add128(m, u128{0, 1}), c)
		m = mul128(m, m)
	}
	return d
}

// CountLine is CountLine(n, k0, step, lo, hi, hits) of the generator whose
// next draw is the run's draw at: the same count and hits. It reports
// false, having done nothing, when Fill has not yet made draws [at,
// at+n).
//
// A draw's top 16 bits place its value r in [R, R + 2^37): it is
// certainly below the line and outside the hit region when R + 2^37 <= k
// - lo, certainly neither when R >= k + hi; only the draws between are
// remade exactly (about 2^-16 of them plus those near the hit region).
func (a *Ahead) CountLine(at int64, n int, k0, step, lo, hi int64, hits []LineHit) (int, []LineHit, bool) {
	return a.countLineWith(countTop, at, n, k0, step, lo, hi, hits)
}

// countLineWith is CountLine with the scan of the top bits given (the
// tests pass countTopScalar).
func (a *Ahead) countLineWith(scan func([]uint16, int64, int64, uint64, []LineHit) (int, []LineHit),
	at int64, n int, k0, step, lo, hi int64, hits []LineHit) (int, []LineHit, bool) {
	if n <= 0 {
		return 0, hits, true
	}
	if at < 0 || at+int64(n) > a.done.Load() {
		return 0, hits, false
	}
	top := a.top[at : at+int64(n)]
	// d = R - (k - lo - 2^37 + 1): certainly below when d < 0, undecided
	// when uint64(d) < w, certainly not below and not a hit otherwise.
	w := uint64(lo+hi) + 1<<aheadShift - 1
	t0 := len(hits)
	below, hits := scan(top, k0-lo-1<<aheadShift+1, step, w, hits)
	// The undecided draws, remade: hits[t0:] holds their indices.
	und := hits[t0:]
	hits = hits[:t0]
	wh := uint64(lo + hi)
	for _, u := range und {
		t := u.T
		r := int64(a.value(at + int64(t)))
		e := r - (k0 - int64(t)*step)
		below += int(uint64(e) >> 63)
		if uint64(e+lo) < wh {
			hits = append(hits, LineHit{t, uint64(r)})
		}
	}
	return below, hits, true
}

// countTopScalar is countTop in Go: it counts the draws t of top with d
// = (top[t] << 37) - (k - t·step) < 0 and appends those with uint64(d) <
// w (T only) to und, in order.
func countTopScalar(top []uint16, k int64, step int64, w uint64, und []LineHit) (int, []LineHit) {
	var below uint64
	for t, v := range top {
		d := int64(v)<<aheadShift - (k - int64(t)*step)
		below += uint64(d) >> 63
		if uint64(d) < w {
			und = append(und, LineHit{T: t})
		}
	}
	return int(below), und
}
