package sim

import (
	"math"
	"sort"

	"github.com/sluicedata/sluice/cache"
)

// This file plays stream's ordered admissions (stream.Options'
// OrderAdmissions, Config.OrderAdmissions): under a cache limit the
// DataLoader workers of a rank take turns at their shard changes in the
// order the training loop consumes the rank's samples (step, then the
// position in the step's batch), each turn once every earlier one was
// taken (cache.Order). A worker whose shard change comes while another
// worker of its rank has an earlier one still to take waits for it.

// noTurn is the key of a chain with no shard change left.
const noTurn = math.MaxInt64

// ordered reports whether the node's workers take turns.
func (nd *node) ordered() bool { return nd.turns }

// takesTurns reports whether c's workers take turns on a node.
func takesTurns(c *Config) bool {
	return c.OrderAdmissions && !c.RankIterator && c.Shape.WorkersPerRank > 1 && c.CacheLimit > 0
}

// nextTurn returns the key of chain c's next shard change (noTurn: none
// left in the chain) and whether it is c's next read.
func (nd *node) nextTurn(c *chain) (key int64, now bool) {
	if c.done {
		return noTurn, false
	}
	prev := nd.cons[c.origin].cur
	for k := c.run; k < len(nd.runs) && nd.runs[k].Start < c.to; k++ {
		run := nd.runs[k]
		if run.Shard != prev {
			off := max(run.Start, c.from) - c.from
			return int64(c.step)<<32 | off, c.move < 0 && k == c.run
		}
		prev = run.Shard
	}
	return noTurn, false
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
		if k, _ := nd.nextTurn(c); k < nd.minTurn[c.origin/nd.perRank] {
			nd.minTurn[c.origin/nd.perRank] = k
		}
	}
}

// turnTime returns when chain c's next read can happen: with turns, a
// shard change that is its rank's next turn waits for the turn before
// (ok false: another worker's turn comes first).
func (nd *node) turnTime(c *chain) (t float64, turn, ok bool) {
	k, now := nd.nextTurn(c)
	if !now {
		return c.t, false, true
	}
	r := c.origin / nd.perRank
	if k != nd.minTurn[r] {
		return 0, true, false
	}
	return math.Max(c.t, nd.turnT[r]), true, true
}

// orderedVictims returns the eviction candidates as the real cache sees
// them where the workers take turns (the Belady distances need not be
// approximated there: every worker's position at a turn is a function of
// the plan): every present shard neither leased nor being fetched, in
// shard order, each with the distance stream.Iterator's NextUses reports
// (from the start of the run its consumer reads, within its look-ahead),
// the nearest over the node's consumers, sorted by cache.CompareCandidates.
func (nd *node) orderedVictims() *listVictims {
	n := len(nd.state)
	if cap(nd.dist) < n {
		nd.dist = make([]int64, n)
	}
	dist := nd.dist[:n]
	for i := range dist {
		dist[i] = -1
	}
	horizon := int64(max(2*nd.c.predownload(), 1024))
	for i := range nd.cons {
		cs := &nd.cons[i]
		end := min(cs.runPos+horizon, cs.n)
		last := -1
		for p := cs.runPos; p < end; {
			sh, e, ok := cs.ShardAt(p)
			if ok && sh != last {
				last = sh
				if d := p - cs.runPos; dist[sh] < 0 || d < dist[sh] {
					dist[sh] = d
				}
			}
			p = max(e, p+1)
		}
	}
	v := &nd.lv
	v.nd, v.next = nd, 0
	v.shards, v.keys = v.shards[:0], v.keys[:0]
	for sh := range n {
		if nd.state[sh] != present || nd.leased[sh] > 0 {
			continue
		}
		v.shards = append(v.shards, sh)
	}
	sort.SliceStable(v.shards, func(a, b int) bool {
		return cache.CompareCandidates(nd.orderedKey(v.shards[a]), nd.orderedKey(v.shards[b])) < 0
	})
	for _, sh := range v.shards {
		v.keys = append(v.keys, nd.orderedKey(sh))
	}
	return v
}

// orderedKey is shard's candidate key for orderedVictims.
func (nd *node) orderedKey(sh int) cache.Candidate {
	d := nd.dist[sh]
	return cache.NewCandidate(d >= 0, d, nd.lastUse[sh])
}

// listVictims is cache.Victims over a sorted list of candidates.
type listVictims struct {
	nd     *node
	shards []int
	keys   []cache.Candidate
	next   int
}

func (v *listVictims) First() (cache.Candidate, bool) {
	if v.next >= len(v.shards) {
		return cache.Candidate{}, false
	}
	return v.keys[v.next], true
}

func (v *listVictims) Evict() int64 {
	s := v.shards[v.next]
	v.next++
	nd := v.nd
	if nd.c.onEvict != nil {
		nd.c.onEvict(nd, s)
	}
	b := nd.c.Dataset.Shards[s].CachedBytes
	nd.evict(s)
	return b
}
