package sim

import (
	"math"

	"github.com/sluicedata/sluice/cache"
)

// This file keeps, where the workers take turns, the eviction candidates'
// keys as the real cache computes them, without a scan of the cache at
// each eviction. The real cache's distance of a shard is the nearest over
// the node's consumers of stream.Iterator.NextUses: from the start of the
// run the consumer reads (its runPos), the first run of the shard within
// its look-ahead (the consumer's window). Each consumer's window slides
// forward with it, so every run of its order comes into the window once
// and leaves it once: the windows are kept as they slide (slide), and per
// shard the list of its runs inside some window (wl), from which its
// distance is the nearest, min(run start − that consumer's runPos)
// (with a count of its live runs: the list may hold dead ones). A list is
// kept in the order of its runs' starts, so that the nearest is found
// among its first runs: no run whose start is past the nearest found plus
// the consumers' farthest runPos can be nearer (the consumers move
// together, their runPos a few samples apart, while a window spans its
// whole look-ahead).
//
// Between two slides of a consumer every distance it gives only shrinks,
// so a candidate's key in the heap (nd.vic) is kept as an upper bound of
// its distance: set when the shard becomes a candidate (turnOffer: the
// distance of a run still in its window, the witness of its last key or
// the next nearest then, else afresh by turnKey), afresh when the run
// that key came from (its witness) leaves its window,
// the one event that can raise it past the key (another run leaving
// does not: the witness stays, no farther than the key says); to the
// farthest a window holds (turnBound) when a shard comes into its first
// window (from unplanned); unplanned when its last run leaves. The victim
// is then the heap's first once its key, computed afresh, is what the
// heap holds (turnVictims.First): every other candidate's distance is at
// most its key's, so none comes before it.

// wentry is a run of a consumer's window: its start (local position) and
// shard.
type wentry struct {
	pos, shard int32
}

// wref is one run of a shard inside a consumer's window: its start
// (local positions fit an int32, as consumer.locals) and the consumer. A
// shard's list (wlist) is not kept in step with the windows: a run that
// left its window stays in the list until the list is next scanned or
// compacted (it is dead once it starts before its consumer's runPos: runs
// leave a window only as it slides forward, bar slide's rebuild, which
// takes its runs out of the lists), so that a run leaving a window
// touches only its shard's counters (unref), not the list.
type wref struct {
	pos, cons int32
}

// wlist is a shard's runs inside the consumers' windows: l[head:] in the
// order of their starts (ties in any order), with dead runs among them
// (see wref; those before head are dead), live of them alive, and the
// run its candidate key came from (wit, its witness) and the next nearest
// when it was computed (wit2; see turnOffer).
type wlist struct {
	l         []wref
	head      int32
	live      int32
	wit, wit2 int64
}

// insert adds run r to the list in the order of starts. A run comes in at
// the far end of its consumer's window, so it goes at or near the end.
func (w *wlist) insert(r wref) {
	w.l = append(w.l, r)
	k := len(w.l) - 1
	for k > int(w.head) && w.l[k-1].pos > r.pos {
		w.l[k] = w.l[k-1]
		k--
	}
	w.l[k] = r
}

// noWitness is a shard's witness when its key is not a distance a run
// gave (a bound, or unplanned).
const noWitness = -1

// witness names a run of a window: its consumer and start.
func witness(cons, pos int32) int64 { return int64(cons)<<32 | int64(uint32(pos)) }

// window is one consumer's window: its runs from runPos to scan, oldest
// first (q[head:]).
type window struct {
	q    []wentry
	head int
	scan int64 // the next local position to come into the window
	// ShardAt's hints for the scan (apart from the walk's).
	hint, runHint int
}

// resetWindows empties the windows at an epoch's start and opens every
// consumer's from its first position.
func (nd *node) resetWindows() {
	if len(nd.win) != len(nd.cons) {
		nd.win = make([]window, len(nd.cons))
		nd.rpos = make([]int64, len(nd.cons))
	}
	if len(nd.wl) != len(nd.state) {
		nd.wl = make([]wlist, len(nd.state))
	}
	for i := range nd.wl {
		w := &nd.wl[i]
		w.l, w.head, w.live, w.wit, w.wit2 = w.l[:0], 0, 0, noWitness, noWitness
	}
	nd.maxRpos = 0
	for i := range nd.win {
		w := &nd.win[i]
		w.q, w.head, w.scan, w.hint, w.runHint = w.q[:0], 0, 0, 0, 0
		nd.cons[i].runPos = 0
		nd.rpos[i] = 0
	}
	// Every window opens at once, all of them a few positions at a time,
	// so that each run comes into its list at or near the end (one
	// consumer's whole window after another's would move each run past
	// the earlier consumers' later ones).
	for lim := int64(16); ; lim += 16 {
		for i := range nd.win {
			nd.growTo(i, min(lim, nd.turnHz, nd.cons[i].n))
		}
		if lim >= nd.turnHz {
			break
		}
	}
}

// slide moves consumer ci's window to start at local position p (the
// start of the run it now reads): the runs before p leave it, those
// within the look-ahead of p come in, and the candidates whose distance
// may have grown or whose class changed get their keys afresh.
func (nd *node) slide(ci int, p int64) {
	cs := &nd.cons[ci]
	w := &nd.win[ci]
	back := p < cs.runPos
	if back {
		// Never in an epoch's order; rebuilt to stay exact.
		nd.rebuild(ci)
		w.q, w.head, w.scan = w.q[:0], 0, p
	}
	cs.runPos = p
	nd.rpos[ci] = p
	if back {
		nd.maxRpos = 0
		for _, r := range nd.rpos {
			nd.maxRpos = max(nd.maxRpos, r)
		}
	} else {
		nd.maxRpos = max(nd.maxRpos, p)
	}
	for w.head < len(w.q) && int64(w.q[w.head].pos) < p {
		w.head++
		nd.unref(ci, w.head-1)
	}
	if w.head > 256 && w.head*2 > len(w.q) {
		n := copy(w.q, w.q[w.head:])
		w.q, w.head = w.q[:n], 0
	}
	if w.scan < p {
		w.scan = p
	}
	nd.grow(ci)
}

// grow brings the runs within consumer ci's look-ahead into its window.
func (nd *node) grow(ci int) {
	cs := &nd.cons[ci]
	nd.growTo(ci, min(cs.runPos+nd.turnHz, cs.n))
}

// growTo brings consumer ci's runs before local position end into its
// window.
func (nd *node) growTo(ci int, end int64) {
	cs := &nd.cons[ci]
	w := &nd.win[ci]
	for w.scan < end {
		sh, e, ok := cs.shardAtHint(w.scan, &w.hint, &w.runHint)
		if ok {
			w.q = append(w.q, wentry{pos: int32(w.scan), shard: int32(sh)})
			wl := &nd.wl[sh]
			if len(wl.l) == cap(wl.l) && int(wl.live) < len(wl.l) {
				nd.compact(wl) // drop the dead runs before the list grows
			}
			wl.insert(wref{pos: int32(w.scan), cons: int32(ci)})
			wl.live++
			if wl.live == 1 && nd.vic.has(sh) {
				nd.vic.set(sh, nd.turnBound(sh)) // unplanned until now
				wl.wit, wl.wit2 = noWitness, noWitness
			}
		}
		w.scan = max(e, w.scan+1)
	}
}

// rebuild takes consumer ci's runs in its window (q[head:]) out of their
// shards' lists (with its dead ones) before the window starts afresh
// behind them, and gives those shards' candidates their keys afresh.
func (nd *node) rebuild(ci int) {
	w := &nd.win[ci]
	for _, e := range w.q[w.head:] {
		wl := &nd.wl[e.shard]
		n := 0
		for _, r := range wl.l[wl.head:] {
			if int(r.cons) != ci {
				wl.l[n] = r
				n++
			}
		}
		wl.l, wl.head = wl.l[:n], 0
		wl.live--
		wl.wit, wl.wit2 = noWitness, noWitness // (may be out of the window)
	}
	for _, e := range w.q[w.head:] {
		if sh := int(e.shard); nd.vic.has(sh) {
			nd.vic.set(sh, nd.turnKey(sh))
		}
	}
}

// compact drops the dead runs of a list (see wref), in place, in order.
func (nd *node) compact(wl *wlist) {
	rpos := nd.rpos
	n := 0
	for _, r := range wl.l[wl.head:] {
		if int64(r.pos) >= rpos[r.cons] {
			wl.l[n] = r
			n++
		}
	}
	wl.l, wl.head = wl.l[:n], 0
}

// unref notes that the run q[k] of consumer ci's window left it. Its
// shard's distance may have grown: a candidate whose key that run gave
// (its witness) gets its key afresh, one with no run left in a window
// becomes unplanned; any other candidate's key is still at least its
// distance (its witness is still in its window, and nearer than when
// the key was computed).
func (nd *node) unref(ci, k int) {
	w := &nd.win[ci]
	shard := int(w.q[k].shard)
	wl := &nd.wl[shard]
	wl.live--
	if !nd.vic.has(shard) {
		if len(wl.l)-int(wl.head) > 2*int(wl.live)+8 {
			nd.compact(wl) // half dead: amortised over the deaths
		}
		return
	}
	if wl.live == 0 || wl.wit == witness(int32(ci), w.q[k].pos) {
		nd.vic.set(shard, nd.turnKey(shard))
	}
}

// turnBound is an upper bound of shard's key (see turnKey): its class,
// and for a planned shard the farthest distance a window holds. First
// computes the distance when the shard comes first.
func (nd *node) turnBound(shard int) cache.Candidate {
	return cache.NewCandidate(nd.wl[shard].live > 0, nd.turnHz, nd.lastUse[shard])
}

// turnKey is shard's candidate key as the real cache computes it where
// the workers take turns: planned when a consumer's window holds a run of
// it, at the nearest such run from that consumer's runPos. It notes that
// run as the shard's witness and passes the list's leading dead runs.
//
// The list is in the order of starts, so the scan stops at the first run
// whose start is at least the nearest distance found past the farthest
// runPos (maxRpos): it and every later run are no nearer to any
// consumer.
func (nd *node) turnKey(shard int) cache.Candidate {
	wl := &nd.wl[shard]
	if wl.live == 0 {
		wl.l, wl.head, wl.wit, wl.wit2 = wl.l[:0], 0, noWitness, noWitness
		return cache.NewCandidate(false, 0, nd.lastUse[shard])
	}
	l := wl.l
	rpos, far := nd.rpos, nd.maxRpos
	d, wit := int64(math.MaxInt64), int64(noWitness)
	d2, wit2 := int64(math.MaxInt64), int64(noWitness)
	for k := int(wl.head); k < len(l); k++ {
		r := l[k]
		p := int64(r.pos)
		if p-far >= d2 {
			break
		}
		x := p - rpos[r.cons]
		if x < 0 {
			if k == int(wl.head) {
				wl.head++ // dead, and first
			}
			continue
		}
		if x < d {
			d2, wit2 = d, wit
			d, wit = x, witness(r.cons, r.pos)
		} else if x < d2 {
			d2, wit2 = x, witness(r.cons, r.pos)
		}
	}
	wl.wit, wl.wit2 = wit, wit2
	return cache.NewCandidate(true, d, nd.lastUse[shard])
}

// witnessDist returns the distance of witness w's run from its consumer's
// runPos, -1 when the run has left its window (or w is none). A run of a
// list is in its window while it starts at or after that runPos: runs
// leave only as the window slides forward (rebuild forgets the witnesses
// of the runs it takes out).
func (nd *node) witnessDist(w int64) int64 {
	if w == noWitness {
		return -1
	}
	cons, pos := int32(w>>32), int64(int32(uint32(w)))
	if d := pos - nd.rpos[cons]; d >= 0 {
		return d
	}
	return -1
}

// turnOffer is the key of shard as it becomes a candidate: an upper bound
// of its distance without a scan of its list where its witness's run, or
// the next nearest when the key was last computed, is still in its window
// (that run's distance now; the shard's distance is at most it), else
// turnKey. At the seed scale that run gives the distance afresh at ~95%
// of the offers: the consumers move together, so the nearest runs stay
// the nearest; the key is otherwise set afresh when it reaches the heap's
// top (turnVictims.First).
func (nd *node) turnOffer(shard int) cache.Candidate {
	wl := &nd.wl[shard]
	if wl.live > 0 {
		if d := nd.witnessDist(wl.wit); d >= 0 {
			return cache.NewCandidate(true, d, nd.lastUse[shard])
		}
		if d := nd.witnessDist(wl.wit2); d >= 0 {
			wl.wit, wl.wit2 = wl.wit2, noWitness
			return cache.NewCandidate(true, d, nd.lastUse[shard])
		}
	}
	return nd.turnKey(shard)
}

// turnVictims is cache.Victims over the node's candidates where the
// workers take turns (see the top of this file).
type turnVictims struct{ nd *node }

func (v turnVictims) First() (cache.Candidate, bool) {
	nd := v.nd
	for {
		s, ok := nd.vic.first()
		if !ok {
			return cache.Candidate{}, false
		}
		k := nd.vic.key[s]
		if k.Class != cache.Planned {
			return k, true
		}
		if f := nd.turnKey(s); f != k {
			nd.vic.set(s, f) // its distance shrank since: look again
			continue
		}
		return k, true
	}
}

func (v turnVictims) Evict() int64 { return v.nd.evictFirst() }
