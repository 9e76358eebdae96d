package sim

import (
	"math"
	"sort"
)

// This file plays stream's ordered admissions (stream.Options'
// OrderAdmissions, Config.OrderAdmissions): under a cache limit the
// DataLoader workers of a rank take turns at their shard changes sample by
// sample, each worker a step behind the one before (turnKey), each turn
// once every earlier one was taken (cache.Order). A worker whose shard change comes while another
// worker of its rank has an earlier one still to take waits for it.
// Taking turns, as in stream, a worker's walk is bounded by its budget and
// window and not by its fetch slots (Stop), and the shards it fetches are
// pinned until its own turn leases them (node.pinned, cache.Pinner): no
// decision depends on when a download ends.

// noTurn is the key of a chain with no shard change left.
const noTurn = math.MaxInt64

// ordered reports whether the node's workers take turns.
func (nd *node) ordered() bool { return nd.turns }

// takesTurns reports whether c's workers take turns on a node.
func takesTurns(c *Config) bool {
	return c.OrderAdmissions && !c.RankIterator && c.Shape.WorkersPerRank > 1 && c.CacheLimit > 0
}

// turnKey returns the key of the shard change at offset off of a rank's
// part of step (of batch samples): step·batch + off·workers, stream's
// workerTurns.key (q·W + worker·B for a worker's q-th sample), times W
// plus the worker, so that two workers' keys are never equal (stream's
// cache.Order breaks such ties by worker, this model's reads by time). A worker's
// keys grow by W a sample, so the rank's workers take their turns sample
// by sample, worker j+1 a step's worth of samples (B/W) behind worker j,
// and a step W or more later comes after every key of this one: a chain
// not begun yet (the worker's next batch) has no turn before any begun.
func turnKey(step int, off int64, workers, batch int) int64 {
	w := int64(max(workers, 1))
	return (int64(step)*int64(max(batch, 1))+off*w)*w + int64(step)%w
}

// turnMemo is nextTurn's answer for a chain, valid while the chain's run
// and move and its consumer's shard are those it was computed from.
type turnMemo struct {
	run, cur int
	move     int64
	key      int64
	now, ok  bool
}

// nextTurn returns the key of chain c's next shard change (noTurn: none
// left in the chain) and whether it is c's next read.
func (nd *node) nextTurn(c *chain) (key int64, now bool) {
	if c.done {
		return noTurn, false
	}
	prev := nd.cons[c.origin].cur
	if m := &c.turn; m.ok && m.run == c.run && m.cur == prev && m.move == c.move {
		return m.key, m.now
	}
	key, now = noTurn, false
	cur := prev
	for k := c.run; k < len(nd.runs) && nd.runs[k].Start() < c.to; k++ {
		run := nd.runs[k]
		if run.Shard() != prev {
			off := max(run.Start(), c.from) - c.from
			key, now = turnKey(c.step, off, nd.perRank, nd.c.Plan.BatchSize), c.move < 0 && k == c.run
			break
		}
		prev = run.Shard()
	}
	c.turn = turnMemo{run: c.run, cur: cur, move: c.move, key: key, now: now, ok: true}
	return key, now
}

// turnMins sets, per rank, the earliest next shard change of its workers:
// the one turn that may be taken now. That of a worker with no unfinished
// begun chain is in a step not begun yet (waitingTurn).
func (nd *node) turnMins() {
	R := nd.c.Shape.RanksPerNode
	if len(nd.minTurn) != R {
		nd.minTurn = make([]int64, R)
		nd.turnT = make([]float64, R)
	}
	for r := range nd.minTurn {
		nd.minTurn[r] = noTurn
	}
	if len(nd.busy) != len(nd.cons) {
		nd.busy = make([]bool, len(nd.cons))
		nd.waiting = make([]turnMemo, len(nd.cons))
	}
	clear(nd.busy)
	for i := range nd.chains {
		c := &nd.chains[i]
		if k, _ := nd.nextTurn(c); k < nd.minTurn[c.rank] {
			nd.minTurn[c.rank] = k
		}
		nd.busy[c.origin] = nd.busy[c.origin] || !c.done
	}
	for r := range nd.minTurn {
		if nd.minTurn[r] >= nd.notBegun() {
			nd.minTurn[r] = min(nd.minTurn[r], nd.waitingTurns(r))
		}
	}
}

// notBegun returns a bound below every key of the steps not begun (the
// first of them at offset 0): a rank's begun chains with a turn below it
// need not look at its waiting workers.
func (nd *node) notBegun() int64 {
	return int64(nd.begun) * int64(max(nd.c.Plan.BatchSize, 1)) * int64(max(nd.perRank, 1))
}

// turnMinsRank sets rank r's earliest next shard change afresh (see
// turnMins), over its chains (nd.rankChains, kept by readUntil).
func (nd *node) turnMinsRank(r int) {
	m := int64(noTurn)
	for _, i := range nd.rankChains[r] {
		if k, _ := nd.nextTurn(&nd.chains[i]); k < m {
			m = k
		}
	}
	if m >= nd.notBegun() {
		for w := range nd.perRank {
			nd.busy[r*nd.perRank+w] = false
		}
		for _, i := range nd.rankChains[r] {
			c := &nd.chains[i]
			nd.busy[c.origin] = nd.busy[c.origin] || !c.done
		}
		m = min(m, nd.waitingTurns(r))
	}
	nd.minTurn[r] = m
}

// waitingTurns returns the earliest next shard change of rank r's workers
// that have no unfinished begun chain (nd.busy): each one's is in its
// next step, not begun yet, where stream's worker has announced it
// (cache.Order.Done) and the others' later turns wait for it. (The model
// begins a worker's next step when the loop takes the step before it, so
// in the turns' order, where a worker's next batch comes before the end
// of the previous worker's, it would take that worker's later turns
// first.)
func (nd *node) waitingTurns(r int) int64 {
	m := int64(noTurn)
	W := nd.perRank
	steps := nd.sc.Steps()
	for w := range W {
		o := r*W + w
		if nd.busy[o] {
			continue
		}
		s := nd.begun + ((w-nd.begun%W)%W+W)%W // the worker's first step not begun
		if s >= steps {
			continue
		}
		cur := nd.cons[o].cur
		if memo := &nd.waiting[o]; memo.ok && memo.run == s && memo.cur == cur {
			m = min(m, memo.key)
			continue
		}
		k := nd.stepTurn(s, r, cur)
		nd.waiting[o] = turnMemo{run: s, cur: cur, key: k, ok: true}
		m = min(m, k)
	}
	return m
}

// stepTurn returns the key of the first shard change in rank r's part of
// step s, or of the worker's later steps, for a consumer on shard cur
// (noTurn: none).
func (nd *node) stepTurn(s, r, cur int) int64 {
	runs := nd.runs
	prev := cur
	for ; s < nd.sc.Steps(); s += nd.perRank {
		from, to := nd.part(s, r)
		k := sort.Search(len(runs), func(k int) bool { return runs[k].Start()+runs[k].Len() > from })
		for ; k < len(runs) && runs[k].Start() < to; k++ {
			if sh := runs[k].Shard(); sh != prev {
				return turnKey(s, max(runs[k].Start(), from)-from, nd.perRank, nd.c.Plan.BatchSize)
			}
		}
	}
	return noTurn
}

// turnTime returns when chain c's next read can happen: with turns, a
// shard change that is its rank's next turn waits for the turn before
// (ok false: another worker's turn comes first).
func (nd *node) turnTime(c *chain) (t float64, turn, ok bool) {
	k, now := nd.nextTurn(c)
	if !now {
		return c.t, false, true
	}
	r := c.rank
	if k != nd.minTurn[r] {
		return 0, true, false
	}
	return math.Max(c.t, nd.turnT[r]), true, true
}
