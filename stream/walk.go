package stream

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/sluicedata/sluice/cache"
	"github.com/sluicedata/sluice/stream/prefetch"
)

// NextUses implements cache.Future: the shards of the next samples, with
// their distance from the iterator's position.
func (it *Iterator) NextUses(fn func(d *cache.Dataset, shard int, distance int64)) {
	// The current shard's run begins at runPos (its shard may still be
	// being acquired): it is at distance 0.
	ids := *it.view.Load()
	p := max(it.runPos.Load(), 0)
	end := min(p+int64(it.horizon), int64(len(ids)))
	last := -1
	for k := p; k < end; k++ {
		id := ids[k]
		if id < 0 {
			continue
		}
		shard, _, err := it.d.planner.Locate(id)
		if err != nil || shard == last {
			continue
		}
		last = shard
		ref := it.d.shards[shard]
		if cds := it.d.streams[ref.stream].cds; cds != nil {
			fn(cds, ref.local, k-p)
		}
	}
}

// prefetch walks the plan ahead of the consumer, fetching the shards of
// the next Predownload samples with bounded parallelism. The order is
// package prefetch's Walk (the simulator plays the same): a fetch refused
// for lack of space (everything else is needed sooner) is retried when the
// consumer moves on.
//
// Without a cache limit the walk is advanced by whoever frees a download
// slot or moves the consumer: the consumer's own goroutine when it moves
// (walk), this goroutine when a lazy plan's IDs come into view, and each
// fetch itself, on its own goroutine, once its bytes are written
// (PrefetchFunc). The next download thus starts without any goroutine
// waking up first. With a loop that alone started downloads, woken when a
// slot freed, a traced BenchmarkColdS3 at load ~10 showed 2-8 ms between a
// download's end and the next one's start, of 10-25 ms per 4 MB shard.
// Under a limit the walk runs where the consumer moves alone, and the
// slots bound its downloads, not the walk (fetchSlots): a download's end
// starts the next one admitted.
func (it *Iterator) prefetch(ctx context.Context) {
	pf := it.pf
	defer func() {
		pf.mu.Lock()
		pf.stopped = true
		it.noteAhead(-int64(pf.w.Ahead()))
		pf.mu.Unlock()
		if pf.slots != nil {
			pf.slots.openAll()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-it.progress: // a lazy plan's remaining IDs are in view
		}
		if it.turns != nil || pf.slots != nil {
			// Taking turns, the walk runs in the turns alone; under a
			// limit, where the consumer moves (see walk).
			continue
		}
		pf.moved.Store(true)
		pf.kick()
	}
}

// newPrefetcher returns the iterator's prefetch walk, stopped with ctx.
func (it *Iterator) newPrefetcher(ctx context.Context) *prefetcher {
	conc := it.d.opts.PrefetchConcurrency
	if conc <= 0 {
		conc = defaultPrefetchConcurrency
	}
	pf := &prefetcher{it: it, ctx: ctx, conc: int64(conc),
		w: prefetch.New(int64(it.d.opts.predownload()))}
	if it.turns == nil && it.d.cache.Limit() > 0 {
		pf.slots = newFetchSlots(int64(conc))
	}
	pf.wp.it = it
	pf.wp.retryAt.Store(-1)
	pf.prep.last = -1
	return pf
}

// walkOut runs the walk that the first sample's delivery released, if it
// has not run yet (see outWalk).
func (it *Iterator) walkOut() {
	if it.outWalk {
		it.outWalk = false
		it.walk(false)
	}
}

// walk advances the prefetch walk on the consumer's goroutine, where Next
// moves (moved: to a new shard, so a fetch refused for room is retried)
// or its first sample is out: what the walk fetches and the cache admits
// then depends on where the consumer is, not on when another goroutine
// gets to run. The walk never waits for a download, another process or
// room (see cache.Via.PrefetchFunc).
func (it *Iterator) walk(moved bool) {
	pf := it.pf
	if pf == nil {
		return
	}
	if moved {
		pf.moved.Store(true)
	}
	if it.d.cache.Limit() == 0 {
		// Without a limit nothing is refused or evicted: what the walk
		// starts depends on the consumer's position alone, whoever walks.
		// A walk in progress on a fetch's goroutine (admitting the
		// fetches its end freed slots for, ~1 ms each) walks once more
		// from the new position instead of holding the consumer back.
		pf.kick()
		return
	}
	if it.out.Load() && it.turns == nil {
		// Past the first sample the walk reads the plan beyond the
		// first batch: a lazy plan's mapping is waited for (microseconds
		// after the first sample, which it does not delay), not walked
		// over when it ends, a time the plan does not set.
		if err := it.planKnown(); err != nil {
			return // Next reports it (more)
		}
	}
	pf.mu.Lock()
	pf.again.Store(false)
	pf.walkLocked()
	pf.mu.Unlock()
	if pf.again.Load() {
		pf.kick() // a fetch's end asked meanwhile
	}
}

// prefetcher is one Iterator's prefetch walk, advanced under mu by kick
// from the Iterator's prefetch goroutine and from the fetches it started.
type prefetcher struct {
	it       *Iterator
	ctx      context.Context
	conc     int64
	inflight atomic.Int64 // downloads started whose bytes are not written yet
	again    atomic.Bool  // a kick found mu held: its holder walks once more
	// moved is set when the consumer moves: the next walk retries a
	// refused fetch (a walk after a fetch's end leaves it refused).
	moved atomic.Bool

	// slots, under a cache limit and without turns, bound the walk's
	// downloads in place of inflight (fetchSlots).
	slots *fetchSlots

	mu      sync.Mutex
	w       *prefetch.Walk
	wp      walkPlan
	stopped bool // the prefetch goroutine returned: start nothing more
	// prep names the shards past the walk's position whose lock files
	// the cache creates ahead (prepareAhead).
	prep prepAhead
}

// kick advances the walk, starting downloads while slots are free. A kick
// that finds another in progress leaves the work to it (it walks again
// before it returns), so a fetch's callback never blocks.
func (pf *prefetcher) kick() {
	pf.again.Store(true)
	for pf.again.Load() {
		if !pf.mu.TryLock() {
			return
		}
		pf.again.Store(false)
		pf.walkLocked()
		pf.mu.Unlock()
	}
}

// walkLocked starts the downloads the walk names, while slots are free.
// Call with mu held.
func (pf *prefetcher) walkLocked() {
	it, w, wp := pf.it, pf.w, &pf.wp
	if pf.stopped || pf.ctx.Err() != nil {
		return
	}
	pos := it.walkPos.Load()
	if pf.moved.Swap(false) {
		if r := wp.retryAt.Swap(-1); r >= 0 {
			w.Refuse(r)
		}
	}
	if n := w.Sync(pos); n > 0 {
		it.noteAhead(-int64(n))
	}
	budget := it.d.prefetchBudget()
	wp.ids = *it.view.Load()
	n := int64(len(wp.ids))
	if !it.out.Load() {
		// Only the first sample's shard until it is out.
		budget = prefetch.FirstBudget(budget)
		n = prefetch.FirstEnd(wp, it.from.Load(), n)
	}
	if it.out.Load() {
		defer pf.prepareAhead(n)
	}
	// Taking turns or under a limit, what the walk admits must not
	// depend on how many of the consumer's downloads are still running
	// (timing): the fetch slots do not bound it there, the budget and
	// window do (under a limit the slots bound the downloads:
	// fetchSlots).
	for it.turns != nil || pf.slots != nil || pf.inflight.Load() < pf.conc {
		at, shard, ok := w.Next(wp, pos, n, budget)
		if !ok {
			return
		}
		ref := it.d.shards[shard]
		st := it.d.streams[ref.stream]
		w.Fetched(at)
		it.noteAhead(1)
		pf.inflight.Add(1)
		if it.turns != nil {
			// Taking turns, the shard is no eviction candidate until
			// this worker's turn leases it (cache.Pinner).
			it.turns.pin(st.cds, ref.local)
		}
		via := st.bucket
		var tk *slotTicket
		if pf.slots != nil {
			tk = pf.slots.ticket()
			via = slotBucket{Bucket: st.bucket, t: tk}
		}
		// The callback runs on the fetch's goroutine (or here, at once,
		// for a shard whose bytes are written already).
		st.cds.Via(via).PrefetchFunc(ref.local, at-pos, func(err error) {
			if tk != nil {
				tk.release()
			}
			if err != nil && it.turns != nil {
				it.turns.unpin(st.cds, ref.local, false)
			}
			if errors.Is(err, cache.ErrNoSpace) {
				// The walk resumes here when the consumer moves.
				for {
					r := wp.retryAt.Load()
					if (r >= 0 && r <= at) || wp.retryAt.CompareAndSwap(r, at) {
						break
					}
				}
			}
			pf.inflight.Add(-1)
			if it.turns == nil && tk == nil {
				// (Taking turns, the walk runs in the turns alone, and
				// under a limit where the consumer moves: a fetch's end
				// comes at a time the plan does not set.)
				pf.kick()
			}
		})
	}
}

// walkPlan is the prefetcher's view of its plan and cache for
// prefetch.Walk: the consumer's IDs and the shards' presence; retryAt is
// the earliest position whose fetch the cache refused (-1: none), set by
// the fetches' goroutines.
type walkPlan struct {
	it      *Iterator
	ids     []int64
	retryAt atomic.Int64
}

func (wp *walkPlan) ShardAt(p int64) (int, int64, bool) {
	id := wp.ids[p]
	if id < 0 {
		return 0, p + 1, false
	}
	shard, _, err := wp.it.d.planner.Locate(id)
	return shard, p + 1, err == nil
}

func (wp *walkPlan) Present(shard int) bool {
	ref := wp.it.d.shards[shard]
	cds := wp.it.d.streams[ref.stream].cds
	// A shard on its way counts as present: whether it is there yet is
	// timing, and the walk's choices must not depend on it.
	return cds == nil || cds.Coming(ref.local)
}

func (wp *walkPlan) Stop() bool { return wp.retryAt.Load() >= 0 }

// noteAhead counts shards fetched ahead of the consumer (Stats.Prefetched).
func (it *Iterator) noteAhead(n int64) {
	it.stats.ahead.Add(n)
	it.d.stats.ahead.Add(n)
}

// prefetchBudget returns how many shards one consumer may fetch ahead
// (prefetch.Budget): its share of the cache after every consumer's current
// shard and one fetch each. Without a limit it is unbounded.
func (d *Dataset) prefetchBudget() int {
	var foot int64
	for _, st := range d.streams {
		if st.cds != nil {
			foot = max(foot, st.cds.MaxFootprint())
		}
	}
	return prefetch.Budget(d.cache.Limit(), d.indexBytes, foot, d.cache.Consumers())
}

// prepAhead is where a walk's lock-file requests stand (prepareAhead):
// the next plan position to look at, the shard of the last run named, and
// the positions of the shards named at or after the walk's position.
type prepAhead struct {
	at    int64
	last  int
	named []int64
}

// prepareAhead has the cache create, in the background, the fetch lock
// files of the conc shards not yet fetched nor on their way that follow
// the walk's position in the plan's first n positions
// (cache.Dataset.PrepareFetch), so that their fetches,
// started when slots free, do not wait for the files' creation (an inode
// each, now and then 5-17 ms beside other shards' syncs). It names only
// files, whose existence decides nothing: what the walk fetches and when
// is unchanged. It runs once the first sample is out, never beside the
// first shard's GET (a file creation there slows the store's answer on a
// machine whose cores it shares). Each position is looked at once per
// pass over the plan. Call with mu held.
func (pf *prefetcher) prepareAhead(n int64) {
	it, p := pf.it, &pf.prep
	next := pf.w.Pos()
	if p.at < next {
		p.at, p.last, p.named = next, -1, p.named[:0]
	}
	k := 0
	for k < len(p.named) && p.named[k] < next {
		k++
	}
	p.named = p.named[:copy(p.named, p.named[k:])]
	ids := pf.wp.ids
	n = min(n, int64(len(ids)))
	for int64(len(p.named)) < pf.conc && p.at < n {
		at := p.at
		p.at++
		if ids[at] < 0 {
			continue
		}
		shard, _, err := it.d.planner.Locate(ids[at])
		if err != nil || shard == p.last {
			continue
		}
		p.last = shard
		if pf.wp.Present(shard) {
			continue // fetched or on its way (the walk's last among them)
		}
		p.named = append(p.named, at)
		ref := it.d.shards[shard]
		if cds := it.d.streams[ref.stream].cds; cds != nil {
			cds.PrepareFetch(ref.local)
		}
	}
}
