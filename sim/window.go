package sim

import "github.com/sluicedata/sluice/cache"

// This file keeps, where the workers take turns, the eviction candidates'
// keys as the real cache computes them, without a scan of the cache at
// each eviction. The real cache's distance of a shard is the nearest over
// the node's consumers of stream.Iterator.NextUses: from the start of the
// run the consumer reads (its runPos), the first run of the shard within
// its look-ahead (the consumer's window). Each consumer's window slides
// forward with it, so every run of its order comes into the window once
// and leaves it once: the windows are kept as they slide (slide), and per
// shard the list of its runs inside some window (wl), from which its
// distance is the nearest, min(run start − that consumer's runPos).
//
// Between two slides of a consumer every distance it gives only shrinks,
// so a candidate's key in the heap (nd.vic) is kept as an upper bound of
// its distance: set afresh (turnKey) at the events that can raise a
// distance (a run leaving a window, the shard becoming a candidate), and
// to the farthest a window holds (turnBound) when a shard comes into its
// first window (from unplanned). The victim is then the heap's first once its key, computed afresh, is what
// the heap holds (turnVictims.First): every other candidate's distance is
// at most its key's, so none comes before it.

// wentry is a run of a consumer's window: its start (local position),
// shard, and index in the shard's list (nd.wl).
type wentry struct {
	pos   int64
	shard int32
	li    int32
}

// wref is one run of a shard inside a consumer's window: its start, the
// consumer, and its sequence number in the consumer's window (its entry
// is q[seq-base]).
type wref struct {
	pos       int64
	cons, seq int32
}

// window is one consumer's window: its runs from runPos to scan, oldest
// first (q[head:]); q[0] is the run numbered base.
type window struct {
	q    []wentry
	head int
	base int32
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
		nd.wl = make([][]wref, len(nd.state))
	}
	for i := range nd.wl {
		nd.wl[i] = nd.wl[i][:0]
	}
	for i := range nd.win {
		w := &nd.win[i]
		w.q, w.head, w.base, w.scan, w.hint, w.runHint = w.q[:0], 0, 0, 0, 0, 0
		nd.cons[i].runPos = 0
		nd.rpos[i] = 0
		nd.grow(i)
	}
}

// slide moves consumer ci's window to start at local position p (the
// start of the run it now reads): the runs before p leave it, those
// within the look-ahead of p come in, and the candidates whose distance
// may have grown or whose class changed get their keys afresh.
func (nd *node) slide(ci int, p int64) {
	cs := &nd.cons[ci]
	w := &nd.win[ci]
	if p < cs.runPos {
		// Never in an epoch's order; rebuilt to stay exact.
		for w.head < len(w.q) {
			w.head++
			nd.unref(ci, w.head-1)
		}
		w.base += int32(len(w.q))
		w.q, w.head, w.scan = w.q[:0], 0, p
	}
	cs.runPos = p
	nd.rpos[ci] = p
	for w.head < len(w.q) && w.q[w.head].pos < p {
		w.head++
		nd.unref(ci, w.head-1)
	}
	if w.head > 1024 && w.head*2 > len(w.q) {
		n := copy(w.q, w.q[w.head:])
		w.base += int32(w.head)
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
	w := &nd.win[ci]
	end := min(cs.runPos+nd.turnHz, cs.n)
	for w.scan < end {
		sh, e, ok := cs.shardAtHint(w.scan, &w.hint, &w.runHint)
		if ok {
			seq := w.base + int32(len(w.q))
			w.q = append(w.q, wentry{pos: w.scan, shard: int32(sh), li: int32(len(nd.wl[sh]))})
			l := append(nd.wl[sh], wref{pos: w.scan, cons: int32(ci), seq: seq})
			nd.wl[sh] = l
			if len(l) == 1 && nd.vic.has(sh) {
				nd.vic.set(sh, nd.turnBound(sh)) // unplanned until now
			}
		}
		w.scan = max(e, w.scan+1)
	}
}

// unref drops the run q[k] of consumer ci's window from its shard's list
// (the last of the list takes its place); the shard's distance may have
// grown: a candidate's key is set afresh.
func (nd *node) unref(ci, k int) {
	e := nd.win[ci].q[k]
	shard := e.shard
	l := nd.wl[shard]
	last := len(l) - 1
	if i := int(e.li); i != last {
		m := l[last]
		l[i] = m
		mw := &nd.win[m.cons]
		mw.q[m.seq-mw.base].li = int32(i)
	}
	nd.wl[shard] = l[:last]
	if nd.vic.has(int(shard)) {
		nd.vic.set(int(shard), nd.turnKey(int(shard)))
	}
}

// turnBound is an upper bound of shard's key (see turnKey): its class,
// and for a planned shard the farthest distance a window holds. First
// computes the distance when the shard comes first.
func (nd *node) turnBound(shard int) cache.Candidate {
	return cache.NewCandidate(len(nd.wl[shard]) > 0, nd.turnHz, nd.lastUse[shard])
}

// turnKey is shard's candidate key as the real cache computes it where
// the workers take turns: planned when a consumer's window holds a run of
// it, at the nearest such run from that consumer's runPos.
func (nd *node) turnKey(shard int) cache.Candidate {
	l := nd.wl[shard]
	if len(l) == 0 {
		return cache.NewCandidate(false, 0, nd.lastUse[shard])
	}
	rpos := nd.rpos
	d := l[0].pos - rpos[l[0].cons]
	for _, r := range l[1:] {
		d = min(d, r.pos-rpos[r.cons])
	}
	return cache.NewCandidate(true, d, nd.lastUse[shard])
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
