package sim

import "math"

// step plays step s beginning at t (the previous step's end): the
// consumers move to the step's first sample and each rank's consumer reads
// its part of the step in order, as an Iterator does: it opens a shard
// when it reaches it, after the previous shard of its part was there
// (demand-fetching it then if absent), while the prefetchers run on every
// completion. The first sample out lifts the first-sample budget. The
// step's batches are then decoded. It returns when the node's batch for
// step s is ready.
//
// With DataLoader workers a worker begins reading its batch when the loop
// asked for it (Config.PrefetchFactor) and it is done with its previous
// one, which may be before t: the reads of every batch begun are played
// together in time order (readUntil), each worker's on its own.
func (nd *node) step(s int, t float64) float64 {
	if s == 0 {
		nd.epochStart, nd.begun = t, 0
		nd.chains = nd.chains[:0]
	}
	// Begin every batch whose start is known: s itself, and with workers
	// each worker's next (its previous batch is done and the loop's ask
	// taken, s' − readAhead < s).
	last := s
	if ra := nd.c.readAhead(); ra > 0 {
		last = min(s-1+len(nd.workerFree), nd.sc.Steps()-1)
	}
	for ; nd.begun <= last; nd.begun++ {
		nd.begin(nd.begun, t)
	}
	// The reads before t first, then what t brings.
	nd.readUntil(t, -1)
	nd.advance(t)
	lo := nd.sc.StepStart(s)
	for nd.stepRun < len(nd.runs) && nd.runs[nd.stepRun].Start()+nd.runs[nd.stepRun].Len() <= lo {
		nd.stepRun++
	}
	nd.progress(s, lo, t)
	ready := nd.readUntil(math.Inf(1), s)
	if math.IsInf(ready, -1) {
		ready = t // nothing to read
	}
	nd.advance(ready)
	// Drop the finished chains.
	k := 0
	for _, c := range nd.chains {
		if c.step > s {
			nd.chains[k] = c
			k++
		}
	}
	nd.chains = nd.chains[:k]
	// DataLoader worker s%W decodes the batch once its shards are there.
	w := s % len(nd.workerFree)
	hi := nd.sc.StepStart(s + 1)
	dec := nd.c.DecodeCost.Seconds() * float64(hi-lo) / float64(nd.c.Shape.RanksPerNode)
	done := math.Max(ready, nd.workerFree[w]) + dec
	nd.workerFree[w] = done
	if ra := nd.c.readAhead(); ra > 0 {
		// The loop takes the batch when it is there and it asks for it
		// (t): that asks worker s mod W for batch s + readAhead.
		nd.taken[s%ra] = math.Max(t, done)
	}
	return done
}

// begin adds the chains of step s (one per rank's part), beginning at t or,
// with workers, when the worker may read it.
func (nd *node) begin(s int, t float64) {
	lo, hi := nd.sc.StepStart(s), nd.sc.StepStart(s+1)
	at := t
	if ra := nd.c.readAhead(); ra > 0 {
		at = nd.epochStart + nd.c.workerStart()
		if s >= ra {
			at = nd.taken[s%ra]
		}
		at = math.Max(at, nd.workerFree[s%len(nd.workerFree)])
	}
	i := nd.stepRun
	for i < len(nd.runs) && nd.runs[i].Start()+nd.runs[i].Len() <= lo {
		i++
	}
	for r := range nd.c.Shape.RanksPerNode {
		from, to := nd.part(s, r)
		if from >= hi {
			break
		}
		for i < len(nd.runs) && nd.runs[i].Start()+nd.runs[i].Len() <= from {
			i++
		}
		nd.chains = append(nd.chains, chain{run: i, from: from, to: to, hi: hi, t: at, first: r == 0,
			step: s, origin: r*nd.perRank + s%nd.perRank, rank: r, done: from >= to, move: -1})
	}
}

// readUntil plays the reads of the begun chains in time order, each up to
// before the time until, or with step ≥ 0 until step's chains are done. It
// returns when the last of step's chains was done (-Inf when it has none).
//
// The next chain is the unfinished one that is earliest (the earlier
// step first at one time); where the workers take turns it is found per
// rank (rankRead), and after a read only for the reader's rank.
func (nd *node) readUntil(until float64, step int) float64 {
	ordered := nd.ordered()
	if !ordered {
		nd.readByHeap(until, step)
		return nd.stepReady(step)
	}
	// Each rank's earliest turn, kept as chains read: a read changes only
	// its own rank's turns and chains (turnMinsRank), so each rank's
	// candidate read is kept and only the reader's rank's found afresh.
	nd.turnMins()
	R := nd.c.Shape.RanksPerNode
	if len(nd.rankBest) != R {
		nd.rankChains = make([][]int32, R)
		nd.rankBest = make([]rankRead, R)
	}
	for r := range nd.rankChains {
		nd.rankChains[r] = nd.rankChains[r][:0]
	}
	for i := range nd.chains {
		r := nd.chains[i].rank
		nd.rankChains[r] = append(nd.rankChains[r], int32(i))
	}
	for r := range R {
		nd.rankRead(r, step)
	}
	for {
		// The first chain (in nd.chains' order) of the earliest read.
		best := -1
		pending := step < 0 // with step ≥ 0: an unfinished chain of step
		for r := range nd.rankBest {
			b := &nd.rankBest[r]
			pending = pending || b.pending
			if b.idx >= 0 {
				if o := best; o < 0 || b.t < nd.rankBest[o].t || (b.t == nd.rankBest[o].t && b.idx < nd.rankBest[o].idx) {
					best = r
				}
			}
		}
		if !pending || best < 0 || nd.rankBest[best].t >= until {
			break
		}
		b := nd.rankBest[best]
		c := &nd.chains[b.idx]
		if b.turn {
			c.t = b.t
			nd.turnT[c.rank] = b.t
		}
		nd.read(c)
		nd.turnMinsRank(c.rank)
		nd.rankRead(c.rank, step)
	}
	return nd.stepReady(step)
}

// rankRead is a rank's next read in readUntil: its chain (-1: none may
// read now), when, and whether it takes the rank's turn; and whether the
// rank has an unfinished chain of the step readUntil waits for.
type rankRead struct {
	idx     int
	t       float64
	turn    bool
	pending bool
}

// rankRead finds rank r's next read afresh: the first of its chains (in
// nd.chains' order) whose read can happen the earliest.
func (nd *node) rankRead(r, step int) {
	b := rankRead{idx: -1}
	for _, i := range nd.rankChains[r] {
		c := &nd.chains[i]
		if c.done {
			continue
		}
		if c.step == step {
			b.pending = true
		}
		t, turn, ok := nd.turnTime(c)
		if !ok {
			continue // another worker's shard change first
		}
		if b.idx < 0 || t < b.t {
			b.idx, b.t, b.turn = int(i), t, turn
		}
	}
	nd.rankBest[r] = b
}

// stepReady returns when the last of step's chains was done (-Inf when it
// has none).
func (nd *node) stepReady(step int) float64 {
	ready := math.Inf(-1)
	for i := range nd.chains {
		if c := &nd.chains[i]; c.step == step {
			ready = math.Max(ready, c.t)
		}
	}
	return ready
}

// read plays chain c's next run: it opens the shard, demand-fetching it
// if absent, and waits for it.
func (nd *node) read(c *chain) {
	nd.advance(c.t)
	if c.move >= 0 {
		// The consumer has the shard it opened: its walk moves on.
		p := c.move
		c.move = -1
		c.done = c.end
		nd.moveTo(c.origin, p, c.t)
		return
	}
	if !c.started {
		// The consumer moves on from its last batch: the shard it held
		// is released.
		c.started = true
		nd.release(c.step - nd.perRank)
	}
	run := nd.runs[c.run]
	sh := run.Shard()
	// A new shard for the consumer (not its last run's, continued): an
	// Iterator moves its run position there before it acquires the shard
	// (the cache's distances are measured from it), and its walk once it
	// has it (c.t below).
	cs := &nd.cons[c.origin]
	newShard := cs.cur != sh
	if newShard {
		if nd.ordered() {
			// The window moves to the new run first: the shard let go,
			// still leased here, gets its key once, as it is offered.
			i := (c.step - cs.first) / cs.stride
			nd.slide(c.origin, int64(cs.locals[i])+max(run.Start(), c.from)-c.from)
		}
		// The iterator lets go of its last shard and leases this one.
		nd.dropCur(c.origin)
		nd.leased[sh]++
		nd.vic.remove(sh)
		cs.cur = sh
		if nd.ordered() {
			nd.unpin(c.origin, sh) // leased in its turn: the walk's pin goes
			// The cache's clock ticks at a lease, once per shard change.
			nd.clock++
			nd.lastUse[sh] = nd.clock
		}
		if nd.single {
			nd.pos = max(run.Start(), c.from)
			nd.moved()
		}
	}
	// A run straddling two ranks' parts is counted once.
	if count := run.Start() >= c.from || c.first; count {
		switch nd.state[sh] {
		case present:
			if nd.arr[sh].done <= c.t {
				nd.hits++
			} else {
				nd.misses++
			}
		case inFlight:
			nd.misses++
		case absent:
			nd.misses++
		}
	}
	if nd.state[sh] == absent {
		nd.demandFetch(sh, c.t, c.origin)
		nd.flush()
	}
	nd.flush() // fetches the last pumps started, on the link
	if newShard && nd.ordered() {
		// Taking turns, the walk moves in the turn, before the shard is
		// there.
		nd.moveTo(c.origin, cs.runPos, c.t)
		nd.flush()
	}
	if nd.slotted() {
		nd.awaitQueued(sh, c.t)
	}
	c.t = math.Max(c.t, nd.waitFor(c, sh))
	if !nd.ordered() {
		nd.clock++
		nd.lastUse[sh] = nd.clock
	}
	// The consumer holds a lease on the shard it reads; the last shard of
	// the step stays leased into the next.
	if run.Start() >= c.from && run.Start()+run.Len() <= c.to {
		// Read whole: its shard's next use is a later run.
		nd.consumed[c.run] = true
		nd.anyConsumed = true
	}
	if run.Start()+run.Len() >= c.hi {
		nd.leased[sh]++
		nd.lease(c.step, sh)
		nd.vic.remove(sh)
	} else if nd.vic.has(sh) {
		if nd.consumed[c.run] && nd.use[sh] == max(run.Start(), nd.pos) {
			// Its key was this run, the earliest not read: now the next.
			nd.use[sh] = nd.unread(int(nd.nextSame[c.run]), nd.pos)
		}
		nd.vic.set(sh, nd.candidate(sh))
	}
	// A new shard for the consumer (not its last run's, continued): its
	// walk moves to the run's start once the shard is there (c.t).
	if newShard && !nd.ordered() {
		i := (c.step - cs.first) / cs.stride
		c.move = int64(cs.locals[i]) + max(run.Start(), c.from) - c.from
	}
	c.run++
	end := c.run >= len(nd.runs) || nd.runs[c.run].Start() >= c.to
	if c.move >= 0 {
		c.end = end
	} else {
		c.done = end
	}
}

// dropCur releases the lease consumer ci holds on the shard it read last
// (an Iterator holds its current shard until it moves to the next).
func (nd *node) dropCur(ci int) {
	cs := &nd.cons[ci]
	if cs.cur < 0 {
		return
	}
	sh := cs.cur
	cs.cur = -1
	nd.leased[sh]--
	nd.offer(sh)
	nd.gen++
}

// chain is one rank's consumer reading its part of a step: the run it
// reads next, its part [from, to) of the step [.., hi), and the time it
// gets there.
type chain struct {
	run      int
	from, to int64
	hi       int64
	t        float64
	step     int
	first    bool // the step's first part
	origin   int  // the consumer reading it
	rank     int  // the consumer's rank (origin / perRank)
	done     bool
	started  bool // read its first run
	// move is the consumer's position to move its walk to at t, the start
	// of the run it has just read (-1: none); end is set when that run
	// was the chain's last.
	move int64
	end  bool
	// bursts counts, per burst of fetches it waited for (by
	// arrival.id), the shards of it the chain needed: nb of them in use.
	bursts [4]struct {
		id int64
		m  int32
	}
	nb int
	// turn caches nextTurn's answer for the inputs it was computed from.
	turn turnMemo
}

// waitFor returns when chain c has shard sh there: its completion, or if
// the chain needs several of one burst still racing at c.t, the expected
// last of them (arrival.wait).
func (nd *node) waitFor(c *chain, sh int) float64 {
	a := &nd.arr[sh]
	if a.k <= 1 || a.last <= c.t || nd.state[sh] == absent {
		return a.done // alone, or the burst is over
	}
	i := 0
	for i < c.nb && c.bursts[i].id != a.id {
		i++
	}
	if i == c.nb {
		if a.done <= c.t {
			return a.done
		}
		if c.nb == len(c.bursts) {
			return a.last
		}
		c.bursts[i].id, c.bursts[i].m = a.id, 0
		c.nb++
	}
	c.bursts[i].m++
	return math.Max(a.done, a.wait(int(c.bursts[i].m)))
}

// leases are the shards the last runs of a step hold into the next.
type leases struct {
	step   int
	shards []int
}
