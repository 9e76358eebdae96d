package stream

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sluicedata/sluice/cache"
)

// turnPatience is how long a DataLoader worker's shard change waits for
// another worker of its rank whose turn comes first and that does not
// move (see cache.Order): then it is passed over until it moves.
const turnPatience = 5 * time.Second

// WorkerGroup is the set of DataLoader workers whose shard changes are
// admitted to the cache in their plan's order: the workers of one job.
// Under a cache limit, the iterators of one rank's workers (Epoch.Iter of
// an epoch with several workers, on one Dataset or on cursors of one
// group) take turns at their shard changes (letting go of one shard,
// leasing or fetching the next) in an order the plan sets: sample by
// sample, each worker a step behind the one before (see workerTurns.key),
// the order in which workers that the training loop asks in turn reach
// them when they read at one pace. What the cache holds, evicts and downloads again is then a
// function of the plan and not of which worker's download ended first
// (package sim plays the same order). Without a limit nothing is evicted
// and no turns are taken.
//
// A Dataset from Open has its own group, which its cursors share (Cursor);
// a server playing the workers of several jobs on one Dataset gives each
// job its own (CursorIn). The zero value is not usable: see
// NewWorkerGroup. A WorkerGroup is safe for concurrent use.
type WorkerGroup struct {
	mu sync.Mutex
	m  map[turnID]*turnEntry

	// beforeMap, when set (tests), runs in the goroutine that maps the
	// rest of a lazy plan (newLazyIterator) of a worker taking turns in
	// the group, before it maps it.
	beforeMap func()
}

// NewWorkerGroup returns an empty group.
func NewWorkerGroup() *WorkerGroup { return &WorkerGroup{m: map[turnID]*turnEntry{}} }

// turnID names the epoch of one rank whose workers share an Order.
type turnID struct {
	epoch, from       int64
	node, rank, works int
	nodes, ranks      int
}

type turnEntry struct {
	o     *cache.Order
	taken []bool // members with an iterator
	refs  int
}

// join returns the turns of worker who of the epoch id, or nil when that
// worker already has an iterator in the group (a second one reads
// without turns).
func (g *WorkerGroup) join(id turnID, who int, batch int) *workerTurns {
	g.mu.Lock()
	defer g.mu.Unlock()
	for k, e := range g.m {
		// An epoch's order is kept after its iterators closed (a worker
		// whose iterator comes after another's was closed finds it left,
		// not absent), until two epochs later.
		if e.refs == 0 && k.epoch+1 < id.epoch {
			delete(g.m, k)
		}
	}
	e := g.m[id]
	if e == nil {
		e = &turnEntry{o: cache.NewOrder(id.works, turnPatience), taken: make([]bool, id.works)}
		g.m[id] = e
	}
	if e.taken[who] {
		return nil
	}
	e.taken[who] = true
	e.refs++
	return &workerTurns{g: g, id: id, o: e.o, who: who, works: int64(id.works), batch: int64(max(batch, 1)),
		freed: make(chan struct{}, 1)}
}

// leave ends a member's part in the group.
func (g *WorkerGroup) leave(t *workerTurns) {
	t.o.Leave(t.who)
	g.mu.Lock()
	defer g.mu.Unlock()
	if e := g.m[t.id]; e != nil && e.o == t.o {
		e.refs--
	}
}

// workerGroup returns d's group: its own (CursorIn), else its root's.
func (d *Dataset) workerGroup() *WorkerGroup {
	if g := d.group.Load(); g != nil {
		return g
	}
	root := d
	if d.parent != nil {
		root = d.parent
	}
	if g := root.group.Load(); g != nil {
		return g
	}
	root.group.CompareAndSwap(nil, NewWorkerGroup())
	return root.group.Load()
}

// CursorIn is Cursor, whose DataLoader workers take their turns in group
// g (see WorkerGroup) instead of d's: a server playing the workers of
// several jobs on one Dataset gives each job its own group, so that one
// job's workers never wait for another's.
func (d *Dataset) CursorIn(g *WorkerGroup) *Dataset {
	c := d.Cursor()
	if g != nil {
		c.group.Store(g)
	}
	return c
}

// workerTurns is one worker iterator's place in its rank's Order. The key
// of the worker's q-th sample (padding aside) orders by q·W + worker·B,
// then worker (see key).
type workerTurns struct {
	g           *WorkerGroup
	id          turnID
	o           *cache.Order
	who         int
	works       int64
	batch       int64
	seq         int64 // samples (padding aside) the iterator passed
	next        int64 // the key of the next turn announced (Done)
	inTurn, end bool
	// ended is closed once the deferred release of the last shard ran
	// (turnEnd).
	ended chan struct{}

	// The Locations the iterator handed out (Iterator.Location) that
	// are not released yet: a client holding a Location holds its
	// shard's lease. A worker's shard change waits in its turn until
	// they are back (awaitReleased), so that what the cache holds at
	// every turn is each worker's current shard alone, whenever the
	// client released them (the agent's Python workers release a reply's
	// locations after they decoded it).
	heldMu sync.Mutex
	held   int64
	freed  chan struct{} // signalled when held drops to 0

	// pins counts, per shard, the fetches the worker's walk started and
	// its turns have not leased yet (Iterator.Pinned): until its own
	// turn at a shard leases it, a shard the worker fetched ahead is no
	// eviction candidate, whenever its download ends.
	pinMu sync.Mutex
	pins  map[pinKey]int
}

// pinKey is a shard of one cache dataset.
type pinKey struct {
	cds   *cache.Dataset
	shard int
}

// pin counts a fetch of shard that the walk starts.
func (t *workerTurns) pin(cds *cache.Dataset, shard int) {
	t.pinMu.Lock()
	if t.pins == nil {
		t.pins = map[pinKey]int{}
	}
	t.pins[pinKey{cds, shard}]++
	t.pinMu.Unlock()
}

// unpin drops one pin of shard (a failed fetch), or every pin of it
// (all: the worker's turn leased it).
func (t *workerTurns) unpin(cds *cache.Dataset, shard int, all bool) {
	k := pinKey{cds, shard}
	t.pinMu.Lock()
	if n := t.pins[k]; n <= 1 || all {
		delete(t.pins, k)
	} else {
		t.pins[k] = n - 1
	}
	t.pinMu.Unlock()
}

// Pinned implements cache.Pinner: the shards the worker's walk fetched
// that its turns have not leased yet (none without turns).
func (it *Iterator) Pinned(fn func(d *cache.Dataset, shard int)) {
	t := it.turns
	if t == nil {
		return
	}
	t.pinMu.Lock()
	defer t.pinMu.Unlock()
	for k := range t.pins {
		fn(k.cds, k.shard)
	}
}

// leased drops the pins of global shard, which the worker's turn has
// leased.
func (it *Iterator) leased(shard int) {
	ref := it.d.shards[shard]
	if cds := it.d.streams[ref.stream].cds; cds != nil {
		it.turns.unpin(cds, ref.local, true)
	}
}

// hand counts a Location handed out.
func (t *workerTurns) hand() {
	t.heldMu.Lock()
	t.held++
	t.heldMu.Unlock()
}

// handBack counts a Location released.
func (t *workerTurns) handBack() {
	t.heldMu.Lock()
	t.held--
	zero := t.held <= 0
	t.heldMu.Unlock()
	if zero {
		select {
		case t.freed <- struct{}{}:
		default:
		}
	}
}

// awaitReleased waits until every Location the iterator handed out is
// released, for at most the turns' patience (by then the other workers
// pass this one over, see cache.Order: the wait keeps the order, it does
// not keep the client from going on), or until ctx ends.
func (t *workerTurns) awaitReleased(ctx context.Context) error {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		t.heldMu.Lock()
		n := t.held
		t.heldMu.Unlock()
		if n <= 0 {
			return nil
		}
		if timer == nil {
			timer = time.NewTimer(turnPatience)
		}
		select {
		case <-t.freed:
		case <-timer.C:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("stream: waiting for the client to release %d locations of worker %d: %w", n, t.who, ctx.Err())
		}
	}
}

// key returns the key of the worker's q-th sample (padding aside):
// q·W + worker·B, in the order of (that, worker). Every worker's keys grow by W a sample, so the rank's
// workers take their turns sample by sample, each a step's worth of
// samples (B/W) behind the one before, as DataLoader workers asked in
// turn by the training loop read at one pace; and the distances the
// cache's eviction compares, measured in each worker's own samples, are
// distances in this order. A worker's batch q div B is the rank's step
// (q div B)·W + worker, and a step W or more later comes after all of
// this one. (Keys in the loop's order, all of worker 0's batch before
// worker 1's, made a shard change wait for the downloads of every earlier
// worker's whole batch and evicted by distances that order does not keep:
// BenchmarkTurnsCostS3's 8 workers at 0.45 fetched 72 times, against 58
// now.)
func (t *workerTurns) key(q int64) int64 {
	// Times W plus the worker: two workers' keys are never equal (the
	// model breaks no ties the way cache.Order does).
	return (q*t.works+int64(t.who)*t.batch)*t.works + int64(t.who)
}

// nextChange returns the sample count (padding aside) at the iterator's
// next shard change after the sample at index p of ids (of shard, the
// seq-th sample): the end of ids when none comes. ids is the whole plan
// (see planKnown).
func (it *Iterator) nextChange(ids []int64, p int64, shard int, seq int64) int64 {
	q := seq + 1
	for k := p + 1; k < int64(len(ids)); k++ {
		id := ids[k]
		if id < 0 {
			continue
		}
		sh, _, err := it.d.planner.Locate(id)
		if err != nil || sh != shard {
			return q
		}
		q++
	}
	return q
}

// turnWait waits for the worker's turn at its shard change to shard at
// index p (its seq-th sample), and returns the context to acquire the
// shard with: it ends the turn once the claim is in (cache.WithAdmitted).
func (it *Iterator) turnWait(p int64, shard int) (context.Context, error) {
	t := it.turns
	if err := it.planKnown(); err != nil {
		return nil, err
	}
	if err := t.o.Wait(it.ctx, t.who, t.key(t.seq)); err != nil {
		return nil, err
	}
	t.inTurn = true
	// The release of the shard the worker leaves happens in its turn:
	// the locations of it that its client still holds come back first.
	if err := t.awaitReleased(it.ctx); err != nil {
		it.turnDone()
		return nil, err
	}
	t.next = t.key(it.nextChange(it.ids, p, shard, t.seq))
	return cache.WithAdmitted(it.ctx, func() { it.turnClaimed(p) }), nil
}

// planKnown waits until the worker's whole plan is in view: a lazy plan
// (newLazyIterator) starts on its first batch while the rest is mapped in
// the background. Taking turns, what a turn decides reads the plan past
// that batch: the walk in the turn (the shards it fetches ahead) and, on
// the eviction path, every worker's next uses (NextUses). When the mapping
// ended is timing, so no turn may be taken before it: a worker waits for
// it before its first turn, and every other worker's first turn waits for
// that one (cache.Order). (A first turn taken with the first batch alone
// in view fetched that batch's shards only, the rest a turn later:
// TestValidateAgainstS3's 800 KB rows measured 40 requests against 39
// simulated in 1-3 runs of 8 under -race.) The wait ends with the
// iteration's context.
func (it *Iterator) planKnown() error {
	if it.mapped == nil || len(it.ids) >= it.total {
		return nil
	}
	select {
	case <-it.mapped:
	case <-it.ctx.Done():
		return fmt.Errorf("waiting for the consumer's plan: %w", it.ctx.Err())
	}
	if it.mapErr != nil {
		return it.mapErr
	}
	it.ids = *it.view.Load()
	return nil
}

// touch stamps global shard's last use in the cache's eviction order at
// the worker's turn (cache.Dataset.Touch): whether its table had it open
// or the cache leased it, and whenever its download ends.
func (it *Iterator) touch(shard int) {
	ref := it.d.shards[shard]
	if cds := it.d.streams[ref.stream].cds; cds != nil {
		cds.Touch(ref.local)
	}
}

// turnClaimed ends the turn of the shard change at index p once the
// shard is claimed (the admitted callback runs on the iterator's
// goroutine, inside Acquire; a shard this Dataset's table has open makes
// no call, and the iterator calls it after): the prefetch walk moves to
// p and starts its fetches in the turn, before the shard is there, so
// that they too are admitted in the rank's order. (Without turns the walk
// moves once the shard is acquired, and until its first sample is out a
// worker fetches only that sample's shard; taking turns there is no such
// budget, whose end would come at a time the order does not set.)
func (it *Iterator) turnClaimed(p int64) {
	if t := it.turns; t != nil && t.inTurn {
		it.walkPos.Store(p)
		it.walk(true)
		it.turnDone()
	}
}

// turnDone ends the current turn, if any (idempotent).
func (it *Iterator) turnDone() {
	if t := it.turns; t != nil && t.inTurn {
		t.inTurn = false
		t.o.Done(t.who, t.next)
	}
}

// turnEnd lets go of the iterator's last shard at the end of its plan in
// its turn there, without waiting for it (the other workers may need the
// training loop to take this one's batches first, see cache.Order.Defer).
func (it *Iterator) turnEnd() {
	t := it.turns
	if t.end {
		return
	}
	t.end = true
	t.ended = make(chan struct{})
	o := it.cur
	it.cur = nil
	t.o.Defer(t.who, t.key(t.seq), func() {
		defer close(t.ended)
		// The locations of the last shard the client holds come back
		// in this turn too (see awaitReleased). An error here is the
		// iteration's end: its leases go with the release below.
		_ = t.awaitReleased(it.ctx)
		if o != nil {
			it.d.table.release(o)
		}
	})
}

// turnClose waits, at the end of a plan read to its end, for the deferred
// turn that lets go of the last shard (turnEnd) to come: leaving the order
// before would run it out of turn. It waits for at most the turns'
// patience, or until the iteration's context ends.
func (it *Iterator) turnClose() {
	t := it.turns
	if t == nil || !t.end || t.ended == nil {
		return
	}
	timer := time.NewTimer(turnPatience)
	defer timer.Stop()
	select {
	case <-t.ended:
	case <-timer.C:
	case <-it.ctx.Done():
	}
}
