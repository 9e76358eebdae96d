package sim

import "math"

// This file plays stream's ordered admissions (stream.Options'
// OrderAdmissions, Config.OrderAdmissions): under a cache limit the
// DataLoader workers of a rank take turns at their shard changes in the
// order the training loop consumes the rank's samples (step, then the
// position in the step's batch), each turn once every earlier one was
// taken (cache.Order). A worker whose shard change comes while another
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
			key, now = int64(c.step)<<32|off, c.move < 0 && k == c.run
			break
		}
		prev = run.Shard()
	}
	c.turn = turnMemo{run: c.run, cur: cur, move: c.move, key: key, now: now, ok: true}
	return key, now
}

// turnMins sets, per rank, the earliest next shard change of its begun
// chains: the one turn that may be taken now. A worker with no begun
// chain has its next shard change in a step not begun, after all of
// these.
func (nd *node) turnMins() {
	R := nd.c.Shape.RanksPerNode
	if len(nd.minTurn) != R {
		nd.minTurn = make([]int64, R)
		nd.turnT = make([]float64, R)
	}
	for r := range nd.minTurn {
		nd.minTurn[r] = noTurn
	}
	for i := range nd.chains {
		c := &nd.chains[i]
		if k, _ := nd.nextTurn(c); k < nd.minTurn[c.rank] {
			nd.minTurn[c.rank] = k
		}
	}
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
	nd.minTurn[r] = m
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
