package sim

import (
	"sort"

	"github.com/sluicedata/sluice/cache"
)

// This file is a node's eviction: the candidates' keys as the consumers
// move (without turns; window.go keeps them where the workers take turns),
// the reservation that evicts by the cache's policy, and the eviction.

// candidate returns a candidate shard's key for the policy: planned when a
// consumer uses it within its look-ahead horizon (what stream.Iterator
// reports to the cache as a Future), its Dist the absolute next use (see
// victims).
func (nd *node) candidate(shard int) cache.Candidate {
	if nd.turns {
		return nd.turnKey(shard)
	}
	u := nd.use[shard]
	return cache.NewCandidate(u >= 0 && u-nd.pos <= nd.horizon, u, nd.lastUse[shard])
}

// offer makes an unleased present shard a candidate.
func (nd *node) offer(shard int) {
	if !nd.tracking {
		return
	}
	if nd.state[shard] != present || !cache.Evictable(nd.leased[shard] > 0 || nd.pinned[shard] > 0, false, false) {
		return
	}
	if nd.turns { // (taking turns, the windows give the key: window.go)
		nd.vic.set(shard, nd.turnOffer(shard))
		return
	}
	nd.use[shard] = nd.nextUse(shard, nd.pos)
	nd.vic.set(shard, nd.candidate(shard))
}

// nextUse is the plan's next use of shard at or after pos (the
// consumers' position, which only grows in an epoch), passing over the
// runs a consumer has read already (-1: none): the start of the first run
// of the shard not read that ends after pos, or pos inside it. Each
// shard's cursor (runAt) moves along its runs (nextSame) as pos grows.
func (nd *node) nextUse(shard int, pos int64) int64 {
	runs := nd.runs
	k := nd.runAt[shard]
	for k >= 0 && runs[k].Start()+runs[k].Len() <= pos {
		k = nd.nextSame[k]
	}
	nd.runAt[shard] = k
	return nd.unread(int(k), pos)
}

// unread returns the start (at least pos) of run k or, if read, of the
// next run of its shard not read (-1: none).
func (nd *node) unread(k int, pos int64) int64 {
	for k >= 0 && k < len(nd.runs) && nd.consumed[k] {
		k = int(nd.nextSame[k])
	}
	if k < 0 || k >= len(nd.runs) {
		return -1
	}
	return max(nd.runs[k].Start(), pos)
}

// moved updates the candidates' keys after the consumers moved to pos:
// the next use of shards whose use is now behind, and the class of shards
// that came into the horizon.
func (nd *node) moved() {
	if !nd.tracking || nd.turns {
		return // (taking turns, the windows keep the keys: window.go)
	}
	runs, pos := nd.runs, nd.pos
	for ; nd.useRun < len(runs) && runs[nd.useRun].Start() < pos; nd.useRun++ {
		r := runs[nd.useRun]
		if !nd.vic.has(r.Shard()) || nd.use[r.Shard()] >= pos {
			if r.Start()+r.Len() > pos {
				break
			}
			continue
		}
		if r.Start()+r.Len() > pos {
			// Still in use: its next use moves with pos.
			nd.use[r.Shard()] = nd.unread(nd.useRun, pos)
			nd.vic.set(r.Shard(), nd.candidate(r.Shard()))
			break
		}
		// Passed: the next use is the start of the shard's next run not
		// read (the first use at or after pos: no run of it lies between).
		u := nd.unread(int(nd.nextSame[nd.useRun]), pos)
		if u >= 0 && u < pos {
			u = nd.nextUse(r.Shard(), pos)
		}
		nd.use[r.Shard()] = u
		nd.vic.set(r.Shard(), nd.candidate(r.Shard()))
	}
	for ; nd.hzRun < len(runs) && runs[nd.hzRun].Start()-pos <= nd.horizon; nd.hzRun++ {
		if sh := runs[nd.hzRun].Shard(); nd.vic.has(sh) && nd.vic.key[sh].Class != cache.Planned && nd.use[sh] >= 0 {
			nd.vic.set(sh, nd.candidate(sh))
		}
	}
}

// reserve makes room for n bytes as cache.Cache.reserve does, by the
// cache's policy: it evicts candidates in cache.CompareCandidates order
// while cache.MayEvict allows (a prefetch distance samples ahead evicts
// only shards needed later), and a prefetch needed no sooner than one just
// refused, with nothing changed since, is refused without a scan. It
// reports whether the bytes fit.
func (nd *node) reserve(n, distance int64, demand bool) bool {
	if nd.limit == 0 || nd.usage+n <= nd.limit {
		return true
	}
	if !demand && nd.refusals.Refused(nd.gen, distance) {
		return false
	}
	if !nd.tracking {
		nd.track()
	}
	if nd.ordered() {
		// The workers take turns: the real cache's candidates exactly.
		cache.Evict(turnVictims{nd}, nd.usage+n-nd.limit, distance, demand)
	} else {
		cache.Evict(nodeVictims{nd}, nd.usage+n-nd.limit, distance, demand)
	}
	if nd.usage+n > nd.limit {
		if !demand {
			nd.refusals.Note(nd.gen, distance)
		}
		return false
	}
	return true
}

// nodeVictims is cache.Victims over the node's candidates; a planned
// candidate's distance is made relative to the consumers' position again.
type nodeVictims struct{ nd *node }

func (v nodeVictims) First() (cache.Candidate, bool) {
	s, ok := v.nd.vic.first()
	if !ok {
		return cache.Candidate{}, false
	}
	k := v.nd.vic.key[s]
	if k.Class == cache.Planned {
		k.Dist -= v.nd.pos
	}
	return k, true
}

func (v nodeVictims) Evict() int64 { return v.nd.evictFirst() }

// evictFirst evicts the first of the candidates (the victim both models'
// Next just returned) and returns the bytes it gave back.
func (nd *node) evictFirst() int64 {
	s, _ := nd.vic.first()
	if nd.c.onEvict != nil {
		nd.c.onEvict(nd, s)
	}
	b := nd.shards[s].CachedBytes
	nd.evict(s)
	return b
}

// track begins the upkeep of the candidates: every unleased present shard
// with its next use from pos, and the cursors of moved.
func (nd *node) track() {
	nd.tracking = true
	for sh := range nd.state {
		nd.offer(sh)
	}
	runs, pos := nd.runs, nd.pos
	nd.useRun = sort.Search(len(runs), func(k int) bool { return runs[k].Start()+runs[k].Len() > pos })
	nd.hzRun = sort.Search(len(runs), func(k int) bool { return runs[k].Start()-pos > nd.horizon })
}

func (nd *node) evict(shard int) {
	nd.usage -= nd.shards[shard].CachedBytes
	nd.state[shard] = absent
	nd.vic.remove(shard)
	nd.evictions++
}
