package sim

import (
	"math"
	"sort"

	"github.com/sluicedata/sluice/stream/prefetch"
)

// consumer is one iterator of a node as the real code runs it: a
// DataLoader worker's stream iterator (the agent, the Python client) or a
// rank's (`sluice stream`, Config.RankIterator). It has its own sample
// order, the subsequence of the node's order it reads, and its own
// prefetcher: a prefetch.Walk over that order with its own window, budget,
// fetch slots and first-sample budget, as stream.Iterator.prefetch. Every
// consumer of a node shares the node's cache, link and eviction.
//
// Its order is its rank's part of every stride-th step from step first
// (a worker reads the batches of steps w, w+W, ...; a rank iterator every
// step), the padding dropped as in the node's order. Positions of the
// consumer (local) are indexes into that order.
type consumer struct {
	nd      *node
	walk    prefetch.Walk
	rank    int
	first   int     // the consumer's first step
	stride  int     // steps between two of its parts
	locals  []int32 // per part: its first local position
	n       int64   // the consumer's length
	hint    int     // ShardAt's part
	runHint int     // ShardAt's node run
	pos     int64   // the walk's position: where the run of its shard begins
	// runPos (kept where the workers take turns) is where the run of the
	// shard it reads begins, from the moment it changes to that shard (an
	// Iterator's runPos, from which it reports its next uses to the
	// cache; pos follows once the shard is there).
	runPos      int64
	cur         int // the shard it read last (-1: none)
	prefetching int // prefetches in flight (on the link), one slot each
	// queue holds, under a cache limit without turns, the shards its walk
	// admitted that wait for a fetch slot, in admission order (stream's
	// fetchSlots): queue[qhead:].
	queue      []int32
	qhead      int
	out        bool // first sample delivered
	firstShard int  // shard of its first sample (-1: none)
	// pins are the shards its walk fetched that it has not leased yet,
	// where the workers take turns (node.pinned).
	pins []int32
}

// part returns rank r's part [from, to) of step s in node positions, as
// the consumers of a step read it (step).
func (nd *node) part(s, r int) (from, to int64) {
	lo, hi := nd.sc.StepStart(s), nd.sc.StepStart(s+1)
	R := nd.c.Shape.RanksPerNode
	per := max((hi-lo)/int64(R), 1)
	from = lo + int64(r)*per
	to = from + per
	if r == R-1 {
		to = hi
	}
	if from >= hi {
		return hi, hi
	}
	return from, min(to, hi)
}

// newConsumers makes the node's consumers for the epoch (reusing their
// buffers): R × W workers, or R rank iterators.
func (nd *node) newConsumers() {
	c := nd.c
	R, W := c.Shape.RanksPerNode, c.Shape.WorkersPerRank
	per, stride := W, W
	if c.RankIterator {
		per, stride = 1, 1
	}
	nd.perRank = per
	nd.single = R*per == 1
	if len(nd.cons) != R*per {
		nd.cons = make([]consumer, R*per)
		window := int64(c.predownload())
		for i := range nd.cons {
			nd.cons[i].walk = *prefetch.New(window)
			nd.cons[i].cur = -1
		}
	}
	for i := range nd.cons {
		nd.dropCur(i) // the last epoch's iterators end
		nd.unpinAll(i)
	}
	steps := nd.sc.Steps()
	nd.waitOut = 0
	// The node run of each part's first position (parts ascend).
	nd.partRun = nd.partRun[:0]
	k := 0
	for s := range steps {
		for r := range R {
			from, _ := nd.part(s, r)
			for k < len(nd.runs) && nd.runs[k].Start()+nd.runs[k].Len() <= from {
				k++
			}
			nd.partRun = append(nd.partRun, int32(k))
		}
	}
	for i := range nd.cons {
		cs := &nd.cons[i]
		cs.nd, cs.rank, cs.first, cs.stride = nd, i/per, i%per, stride
		cs.walk.Reset()
		cs.locals = cs.locals[:0]
		cs.hint, cs.runHint, cs.pos, cs.runPos, cs.cur, cs.prefetching, cs.out, cs.firstShard = 0, 0, 0, 0, -1, 0, false, -1
		cs.queue, cs.qhead = cs.queue[:0], 0
		var n int64
		for s := cs.first; s < steps; s += stride {
			from, to := nd.part(s, cs.rank)
			cs.locals = append(cs.locals, int32(n))
			if cs.firstShard < 0 && to > from {
				cs.firstShard = int(nd.lid[nd.sc.ShardAt(from)])
			}
			n += to - from
		}
		cs.n = n
		if cs.firstShard < 0 || nd.state[cs.firstShard] == present || nd.ordered() {
			// (Taking turns, a worker has no first-sample budget.)
			cs.out = true
		} else {
			nd.waitOut++
		}
	}
}

// segment returns the part holding local position p (len(locals) if none).
func (cs *consumer) segment(p int64) int { return cs.segmentHint(p, &cs.hint) }

// segmentHint is segment starting its search from *hint, which it sets.
func (cs *consumer) segmentHint(p int64, hint *int) int {
	l := cs.locals
	i := *hint
	in := func(k int) bool {
		return k < len(l) && int64(l[k]) <= p && (k+1 == len(l) || p < int64(l[k+1]))
	}
	if !in(i) {
		if in(i + 1) {
			i++
		} else {
			i = sort.Search(len(l), func(k int) bool { return int64(l[k]) > p }) - 1
			if i < 0 {
				i = len(l)
			}
		}
	}
	*hint = i
	return i
}

// nodePos returns the node position of local position p.
func (cs *consumer) nodePos(p int64) int64 {
	i := cs.segment(p)
	if i >= len(cs.locals) {
		return cs.nd.sc.Len()
	}
	from, _ := cs.nd.part(cs.first+i*cs.stride, cs.rank)
	return from + p - int64(cs.locals[i])
}

// ShardAt implements prefetch.Plan over the consumer's order.
func (cs *consumer) ShardAt(p int64) (int, int64, bool) {
	return cs.shardAtHint(p, &cs.hint, &cs.runHint)
}

// shardAtHint is ShardAt with its own search hints (a scan elsewhere in
// the order than the walk's keeps its own).
func (cs *consumer) shardAtHint(p int64, hint, runHint *int) (int, int64, bool) {
	i := cs.segmentHint(p, hint)
	if p >= cs.n || i >= len(cs.locals) {
		return 0, p + 1, false
	}
	from, to := cs.nd.part(cs.first+i*cs.stride, cs.rank)
	np := from + p - int64(cs.locals[i])
	runs := cs.nd.runs
	in := func(k int) bool { return k < len(runs) && runs[k].Start() <= np && np < runs[k].Start()+runs[k].Len() }
	k := *runHint
	if !in(k) {
		if in(k + 1) {
			k++
		} else if k = int(cs.nd.partRun[(cs.first+i*cs.stride)*cs.nd.c.Shape.RanksPerNode+cs.rank]); !in(k) {
			k = sort.Search(len(runs), func(k int) bool { return runs[k].Start()+runs[k].Len() > np })
		}
	}
	*runHint = k
	if k >= len(runs) {
		return 0, p + 1, false
	}
	end := min(runs[k].Start()+runs[k].Len(), to)
	return runs[k].Shard(), p + end - np, true
}

// Present implements prefetch.Plan as stream's walk does: the shard's
// files are in place or on their way (cache.Dataset.Coming).
func (cs *consumer) Present(shard int) bool { return cs.nd.state[shard] != absent }

// Stop implements prefetch.Plan: every fetch slot of the consumer is busy.
// Where the workers take turns or under a cache limit the slots do not
// bound the walk (as in stream's): what it admits must not depend on how
// many of its downloads are still running (under a limit they bound the
// downloads: slotted).
func (cs *consumer) Stop() bool {
	return !cs.nd.turns && cs.nd.limit == 0 && cs.prefetching >= cs.nd.c.concurrency()
}

// slotted reports whether the fetch slots bound the downloads the walks
// admitted rather than the walks (stream's fetchSlots): under a cache
// limit, without turns (taking turns, nothing bounds a turn's downloads).
func (nd *node) slotted() bool { return nd.limit > 0 && !nd.turns }

// startQueued puts consumer ci's admitted fetches on their way at t, in
// admission order, while it has a slot free.
func (nd *node) startQueued(ci int, t float64) {
	cs := &nd.cons[ci]
	for cs.qhead < len(cs.queue) && cs.prefetching < nd.c.concurrency() {
		sh := int(cs.queue[cs.qhead])
		cs.qhead++
		nd.pending = append(nd.pending, pend{shard: sh, t: t, origin: int32(ci)})
		nd.owners[sh] = append(nd.owners[sh], int32(ci))
		cs.prefetching++
	}
	if cs.qhead == len(cs.queue) {
		cs.queue, cs.qhead = cs.queue[:0], 0
	}
}

// awaitQueued plays the completions until shard, which a consumer waits
// for at t, is on the link: a fetch still waiting for its walk's slot
// starts when a download of that walk ends (its slots hold the shards
// before it in the walk's order, which the consumer read first).
func (nd *node) awaitQueued(shard int, t float64) {
	queued := func() bool { return nd.state[shard] == inFlight && math.IsInf(nd.arr[shard].done, 1) }
	for nd.flush(); queued() && len(nd.events) > 0; nd.flush() {
		ev := nd.events.pop()
		nd.complete(int(ev.shard), ev.at)
	}
	if queued() {
		// (A queue waits only behind downloads on the link: not reached.)
		nd.openQueues(t)
	}
}

// openQueues starts every queued fetch at t: the iterators ended (stream's
// fetchSlots.openAll).
func (nd *node) openQueues(t float64) {
	for ci := range nd.cons {
		cs := &nd.cons[ci]
		for _, sh := range cs.queue[cs.qhead:] {
			nd.pending = append(nd.pending, pend{shard: int(sh), t: t, origin: int32(ci)})
		}
		cs.queue, cs.qhead = cs.queue[:0], 0
	}
	nd.flush()
}

// moveTo moves the consumer's walk to local position p, where the run of
// the shard it has just taken begins (an Iterator's walk position once it
// acquired the shard), and runs it at t.
func (nd *node) moveTo(ci int, p int64, t float64) {
	cs := &nd.cons[ci]
	cs.pos = p
	cs.walk.Sync(p)
	nd.pump(ci, t)
}

// pump runs the consumer's prefetcher at t: its walk names the shards to
// fetch within its window ahead of it, while its fetch slots and budget
// allow; a fetch the cache refuses stops the walk until the consumer
// moves on.
func (nd *node) pump(ci int, t float64) {
	cs := &nd.cons[ci]
	if cs.walk.Refused() {
		return
	}
	budget, n := nd.budget, cs.n
	if !cs.out {
		// Until its first sample is out a consumer fetches only its
		// first sample's shard.
		budget = prefetch.FirstBudget(budget)
		n = prefetch.FirstEnd(cs, 0, n)
	}
	for {
		at, sh, ok := cs.walk.Next(cs, cs.pos, n, budget)
		if !ok {
			return
		}
		if nd.state[sh] == absent {
			dist := max(cs.nodePos(at)-nd.pos, 0)
			if nd.ordered() {
				// The real cache's distances (orderedVictims): the
				// walk's, from its position.
				dist = max(at-cs.pos, 1)
			}
			if !nd.reserve(nd.shards[sh].Footprint, dist, false) {
				if nd.ordered() {
					// The refused fetch ends, which the cache signals
					// as it does every fetch's end: its memo of the
					// refusal is stale at once.
					nd.gen++
				}
				// A refused fetch counts against the budget until the
				// consumer reaches it, as stream's walk counts it
				// before the cache answers.
				cs.walk.Fetched(at)
				cs.walk.Refuse(at)
				return
			}
			if nd.c.onPrefetch != nil {
				nd.c.onPrefetch(nd, ci, at, sh)
			}
			if nd.slotted() && cs.prefetching >= nd.c.concurrency() {
				// Admitted, its download waits for a slot.
				nd.admitFetch(sh, false)
				cs.queue = append(cs.queue, int32(sh))
				cs.walk.Fetched(at)
				continue
			}
			nd.fetch(sh, t, false, ci)
			if nd.ordered() {
				nd.pinned[sh]++
				cs.pins = append(cs.pins, int32(sh))
			}
		}
		// On its way (started now or before): the prefetcher holds a
		// slot until it is there.
		nd.owners[sh] = append(nd.owners[sh], int32(ci))
		cs.prefetching++
		cs.walk.Fetched(at)
	}
}

// unpin drops consumer ci's pins of shard, which its turn leases.
func (nd *node) unpin(ci, shard int) {
	cs := &nd.cons[ci]
	k := 0
	for _, p := range cs.pins {
		if int(p) == shard {
			nd.pinned[shard]--
			continue
		}
		cs.pins[k] = p
		k++
	}
	cs.pins = cs.pins[:k]
}

// unpinAll drops every pin of consumer ci (its iterator ends): the shards
// become candidates where nothing else holds them.
func (nd *node) unpinAll(ci int) {
	cs := &nd.cons[ci]
	for _, p := range cs.pins {
		nd.pinned[p]--
		nd.offer(int(p))
	}
	cs.pins = cs.pins[:0]
}
