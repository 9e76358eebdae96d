package stream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicedata/sluice/cache"
	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/plan"
	"github.com/sluicedata/sluice/stream/prefetch"
)

// Epoch is one epoch of one rank: the plan dealt to the current world,
// from the resume position. Iterators are made from it per worker (or
// for the whole rank). An Epoch is safe for concurrent use.
type Epoch struct {
	d     *Dataset
	ep    *plan.Epoch
	spec  plan.EpochSpec
	node  int
	rank  int // rank of node, in the parallel world
	works int
}

// NewEpoch begins the next epoch for world w with workers DataLoader
// workers per rank, as MosaicML's __iter__ does: the epoch counter
// advances now, and a loaded resume state that is not stale sets the
// epoch, the position and the order's parameters. It fails when the cache
// limit cannot hold one leased shard per worker plus one being fetched.
func (d *Dataset) NewEpoch(ctx context.Context, w plan.World, workers int) (*Epoch, error) {
	if workers <= 0 {
		workers = 1
	}
	if w.Nodes == 0 && w.RanksPerNode == 0 {
		w = plan.World{Nodes: 1, RanksPerNode: 1}
	}
	pw, err := w.Parallel()
	if err != nil {
		return nil, fmt.Errorf("stream: %w", err)
	}
	shape, err := w.Shape(workers)
	if err != nil {
		return nil, fmt.Errorf("stream: %w", err)
	}
	if err := d.checkLimit(workers); err != nil {
		return nil, err
	}
	d.mu.Lock()
	spec, err := d.tracker.Begin(shape)
	if err == nil {
		d.world = &w
	}
	d.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("stream: %w", err)
	}
	ep, err := d.planner.Epoch(spec)
	if err != nil {
		return nil, fmt.Errorf("stream: %w", err)
	}
	return &Epoch{d: d, ep: ep, spec: ep.Spec(), node: pw.Node(), rank: pw.RankOfNode(), works: workers}, nil
}

// Number returns the epoch number.
func (e *Epoch) Number() int64 { return e.spec.Epoch }

// SampleInEpoch returns the global position the epoch resumes from.
func (e *Epoch) SampleInEpoch() int64 { return e.spec.SampleInEpoch }

// Spec returns the epoch's resolved plan parameters.
func (e *Epoch) Spec() plan.EpochSpec { return e.spec }

// Plan returns the epoch's plan.
func (e *Epoch) Plan() *plan.Epoch { return e.ep }

// ResumeCheck returns nil unless this epoch resumes a stopped run in a way
// that is not exactly-once (MosaicML's order repeats or skips samples on
// this shape); then an error matching plan.ErrInexactResume names why. See
// plan.Epoch.ResumeCheck.
func (e *Epoch) ResumeCheck() error { return e.ep.ResumeCheck() }

// Iter returns an iterator over one DataLoader worker's samples (worker
// in [0, workers)), in the order that worker yields them. ctx bounds the
// whole iteration and its prefetching.
func (e *Epoch) Iter(ctx context.Context, worker int) (*Iterator, error) {
	if worker < 0 || worker >= e.works {
		return nil, fmt.Errorf("stream: worker %d out of range [0, %d)", worker, e.works)
	}
	src, err := e.ep.WorkerIter(e.node, e.rank, worker)
	if err != nil {
		return nil, fmt.Errorf("stream: %w", err)
	}
	first, err := src.Next()
	if err != nil {
		return nil, fmt.Errorf("stream: %w", err)
	}
	var t *workerTurns
	if e.works > 1 && e.d.opts.OrderAdmissions && e.d.cache != nil && e.d.cache.Limit() > 0 {
		// Under a limit the workers' shard changes may take turns in
		// the rank's order (see WorkerGroup).
		id := turnID{epoch: e.spec.Epoch, from: e.spec.SampleInEpoch, node: e.node, rank: e.rank, works: e.works,
			nodes: e.ep.Spec().Shape.Nodes, ranks: e.ep.Spec().Shape.RanksPerNode}
		t = e.d.workerGroup().join(id, worker, e.d.opts.BatchSize)
	}
	if src.Remaining() == 0 {
		return newIterator(ctx, e.d, first, t), nil
	}
	return newLazyIterator(ctx, e.d, first, src, t), nil
}

// RankIter returns an iterator over the whole rank's samples in the order
// an in-order PyTorch DataLoader yields them: batches taken round-robin
// over the workers.
func (e *Epoch) RankIter(ctx context.Context) (*Iterator, error) {
	if e.works == 1 {
		// One worker: its order is the rank's (padding is skipped).
		return e.Iter(ctx, 0)
	}
	batches, err := e.ep.RankBatches(e.node, e.rank)
	if err != nil {
		return nil, fmt.Errorf("stream: %w", err)
	}
	n := 0
	for _, b := range batches {
		n += len(b)
	}
	ids := make([]int64, 0, n)
	for _, b := range batches {
		ids = append(ids, b...)
	}
	return newIterator(ctx, e.d, ids, nil), nil
}

// Iterator yields one consumer's samples in plan order, in the Scanner
// shape:
//
//	for it.Next() {
//		rec := it.Record()
//	}
//	if err := it.Err(); err != nil { ... }
//	it.Close()
//
// It prefetches ahead of its position and holds a lease on the shard of
// the current sample. An Iterator belongs to one goroutine.
type Iterator struct {
	ctx context.Context
	d   *Dataset
	// ids holds the sample IDs known to the consumer (-1 for padding):
	// the whole list, or for a lazy plan its first batch until the rest
	// is mapped. view publishes the same list to the prefetcher and the
	// cache's eviction path; it grows once, from the first batch to the
	// whole list.
	ids   []int64
	view  atomic.Pointer[[]int64]
	total int // length of the whole list
	// mapped is closed when a lazy plan's remaining IDs are in view (or
	// mapErr is set); nil when ids is complete from the start.
	mapped chan struct{}
	mapErr error
	// pos is the index in ids of the next sample to deliver.
	pos atomic.Int64
	// runPos is where the run of the current shard begins (the position of
	// its first sample), set when Next moves to a new shard, before it is
	// acquired; walkPos is the same once it is acquired. The cache's
	// eviction path measures distances from runPos, the prefetcher walks
	// from walkPos: not from pos, which moves per sample, so that what is
	// fetched and evicted depends on the plan and the shards' order of
	// arrival, not on how far the consumer has read when a fetch ends.
	runPos, walkPos atomic.Int64

	// out is set once the first sample is delivered: until then the
	// prefetcher fetches only its shard, the shard of the first sample at
	// or after from (the position after the samples Skip passed).
	out  atomic.Bool
	from atomic.Int64

	cur   *openShard
	id    int64
	j     int
	rec   []byte
	err   error
	stats counters
	n     int64 // samples delivered

	horizon  int
	progress chan struct{}
	pf       *prefetcher // nil without a cache
	walked   bool        // the first walk has run (Next)
	// outWalk is set when the first sample is out and the walk that it
	// releases (the fetches beyond the first shard) has not run: the next
	// Next or Skip runs it first, so that the first sample is handed over
	// without waiting for the cache to admit those fetches (their lock
	// and temporary files: ~9 ms of a 19 ms time to first sample at load
	// 3-5 when it ran before the first Next returned). The walk starts
	// from the same run and the same cache state either way.
	outWalk      bool
	cancel       context.CancelFunc
	wg           sync.WaitGroup
	removeFuture func()
	closed       bool
	// turns is the iterator's place in its rank's order of shard changes
	// (nil: it takes no turns; see WorkerGroup).
	turns *workerTurns
}

func newIterator(ctx context.Context, d *Dataset, ids []int64, t *workerTurns) *Iterator {
	pctx, cancel := context.WithCancel(ctx)
	it := &Iterator{
		ctx: ctx, d: d, ids: ids, total: len(ids), cancel: cancel, progress: make(chan struct{}, 1),
		horizon: max(2*d.opts.predownload(), 1024), turns: t,
	}
	it.view.Store(&ids)
	it.out.Store(t != nil) // taking turns, no first-sample budget (see turnClaimed)
	it.start(pctx)
	return it
}

// newLazyIterator returns an iterator that starts on the first batch of a
// worker's plan while the rest of the plan is mapped in the background:
// after a resume the first sample needs only the first batch's IDs, not
// the whole remaining list.
func newLazyIterator(ctx context.Context, d *Dataset, first []int64, src *plan.WorkerIter, t *workerTurns) *Iterator {
	pctx, cancel := context.WithCancel(ctx)
	it := &Iterator{
		ctx: ctx, d: d, ids: first, total: len(first) + src.Remaining(), cancel: cancel,
		progress: make(chan struct{}, 1), mapped: make(chan struct{}),
		horizon: max(2*d.opts.predownload(), 1024), turns: t,
	}
	it.view.Store(&first)
	it.out.Store(t != nil)
	it.wg.Add(1)
	go func() {
		defer it.wg.Done()
		defer close(it.mapped)
		all := make([]int64, len(first), it.total)
		copy(all, first)
		for src.Remaining() > 0 {
			seg, err := src.Next()
			if err != nil {
				it.mapErr = fmt.Errorf("stream: %w", err)
				return
			}
			if len(seg) == 0 {
				break
			}
			all = append(all, seg...)
		}
		it.view.Store(&all)
		select {
		case it.progress <- struct{}{}:
		default:
		}
	}()
	it.start(pctx)
	return it
}

// start begins the iteration's clock and its prefetcher.
func (it *Iterator) start(pctx context.Context) {
	d := it.d
	it.stats.begin(time.Now())
	d.stats.start.CompareAndSwap(0, time.Now().UnixNano())
	if d.cache != nil {
		it.removeFuture = d.cache.AddFuture(it)
		it.pf = it.newPrefetcher(pctx)
		it.wg.Add(1)
		go func() {
			defer it.wg.Done()
			it.prefetch(pctx)
		}()
	}
}

// Len returns the number of sample slots of the iteration, padding
// included (padding is skipped, so at most Len samples are yielded).
func (it *Iterator) Len() int { return it.total }

// Skip passes over the next n samples (padding aside) without fetching
// or leasing their shards, and returns how many it passed: fewer only at
// the end or on error (see Err). A consumer resumed after samples it
// already has (the agent replaying a worker's position after a crash)
// uses it, so the replay needs no cache space.
func (it *Iterator) Skip(n int64) int64 {
	it.walkOut()
	var k int64
	for k < n && it.err == nil && !it.closed {
		p := it.pos.Load()
		if p >= int64(len(it.ids)) && !it.more() {
			break
		}
		id := it.ids[p]
		it.pos.Store(p + 1)
		if id >= 0 {
			k++
			if it.turns != nil {
				it.turns.seq++
			}
		}
	}
	if it.n == 0 {
		it.from.Store(it.pos.Load())
		it.runPos.Store(it.pos.Load())
		it.walkPos.Store(it.pos.Load())
	}
	return k
}

// Next advances to the next sample, fetching its shard if needed. It
// returns false at the end or on error (see Err).
func (it *Iterator) Next() bool {
	if it.err != nil || it.closed {
		return false
	}
	if !it.walked {
		// The first walk, from where the reading begins (after Skip);
		// taking turns, in the first shard change's turn.
		it.walked = true
		if it.turns == nil {
			it.walk(true)
		}
	}
	it.walkOut()
	for {
		p := it.pos.Load()
		if p >= int64(len(it.ids)) && !it.more() {
			if it.turns != nil && it.err == nil {
				it.turnEnd()
			}
			it.release()
			if it.err == nil {
				it.err = it.d.cacheErr(it.ctx)
			}
			return false
		}
		id := it.ids[p]
		it.pos.Store(p + 1)
		if id < 0 {
			continue
		}
		shard, j, err := it.d.planner.Locate(id)
		if err != nil {
			it.err = fmt.Errorf("stream: sample %d: %w", id, err)
			return false
		}
		if it.cur == nil || it.cur.shard != shard {
			actx := it.ctx
			start := time.Now()
			if it.turns != nil {
				// The release, the lease or fetch and the cache's view
				// of where this worker is change in its turn.
				if actx, err = it.turnWait(p, shard); err != nil {
					it.err = fmt.Errorf("stream: sample %d: %w", id, err)
					return false
				}
			}
			it.release()
			it.runPos.Store(p)
			// Under a cache limit the shard is read once its fetch has
			// ended (synced and renamed): a fetch still committing a shard
			// its consumer has passed would keep it from eviction for as
			// long as the disk takes, and what is evicted (and fetched
			// again) would depend on that.
			early := it.d.cache == nil || it.d.cache.Limit() == 0
			o, hit, err := it.d.table.acquire(actx, shard, early)
			if it.turns != nil {
				it.turnClaimed(p) // an open shard of this Dataset's table: no call to the cache
				it.turns.seq++
			}
			w := int64(time.Since(start))
			it.stats.wait.Add(w)
			it.d.stats.wait.Add(w)
			if err != nil {
				it.err = err
				return false
			}
			it.stats.hit(hit)
			it.d.stats.hit(hit)
			it.cur = o
			if it.turns == nil {
				it.walkPos.Store(p)
				it.walk(true)
			}
		} else if it.turns != nil {
			it.turnPass(p, shard)
		}
		rec, err := it.cur.r.Record(int(j))
		if err != nil {
			it.err = fmt.Errorf("stream: sample %d: %w", id, err)
			return false
		}
		it.id, it.j, it.rec = id, int(j), rec
		now := time.Now()
		it.stats.delivered(len(rec), now)
		it.d.stats.delivered(len(rec), now)
		it.n++
		if it.n == 1 {
			it.out.Store(true)
			it.outWalk = true // see walkOut
		}
		return true
	}
}

// more waits for a lazy plan's remaining IDs and reports whether the
// consumer has more to read; it sets it.err when the mapping failed or
// the iteration's context ended.
func (it *Iterator) more() bool {
	if it.mapped == nil || len(it.ids) >= it.total {
		return false
	}
	start := time.Now()
	select {
	case <-it.mapped:
	case <-it.ctx.Done():
		it.err = fmt.Errorf("stream: waiting for the plan: %w", it.ctx.Err())
		return false
	}
	w := int64(time.Since(start))
	it.stats.wait.Add(w)
	it.d.stats.wait.Add(w)
	if it.mapErr != nil {
		it.err = it.mapErr
		return false
	}
	it.ids = *it.view.Load()
	return it.pos.Load() < int64(len(it.ids))
}

func (it *Iterator) release() {
	if it.cur != nil {
		it.d.table.release(it.cur)
		it.cur = nil
	}
}

// ID returns the current sample's global ID.
func (it *Iterator) ID() int64 { return it.id }

// Shard returns the current sample's global shard ID and index in it,
// or -1, -1 without a current sample.
func (it *Iterator) Shard() (shard, index int) {
	if it.cur == nil {
		return -1, -1
	}
	return it.cur.shard, it.j
}

// Record returns the current sample's raw record. It is a view into the
// mapped shard, valid until the next call to Next or Close.
func (it *Iterator) Record() []byte { return it.rec }

// Sample decodes the current sample.
func (it *Iterator) Sample() (format.Sample, error) {
	if it.cur == nil {
		return nil, errors.New("stream: Sample called without a current sample")
	}
	s, err := it.cur.sample(it.j)
	if err != nil {
		return nil, fmt.Errorf("stream: sample %d: %w", it.id, err)
	}
	return s, nil
}

// Yielded returns the number of samples delivered so far.
func (it *Iterator) Yielded() int64 { return it.n }

// Err returns the error that stopped the iteration, if any.
func (it *Iterator) Err() error { return it.err }

// Stats returns the iterator's figures.
func (it *Iterator) Stats() Stats { return it.stats.snapshot() }

// Close stops prefetching and releases the current shard. Locations
// handed out stay valid until released.
func (it *Iterator) Close() error {
	if it.closed {
		return nil
	}
	it.closed = true
	if it.turns != nil {
		it.turnDone()
		it.turns.g.leave(it.turns)
	}
	it.cancel()
	it.wg.Wait()
	if it.removeFuture != nil {
		it.removeFuture()
	}
	it.release()
	return nil
}

// Location is where one sample lives in the cache: the raw shard file and
// the byte range of its record. It holds a lease that keeps the file in
// place until Release.
type Location struct {
	// Sample is the global sample ID.
	Sample int64
	// Shard is the global shard ID; Index the sample's position in it.
	Shard, Index int
	// Path is the absolute path of the raw (uncompressed) shard file.
	Path string
	// Offset and Length give the record's byte range in the file.
	Offset, Length int64

	t    *shardTable
	o    *openShard
	once sync.Once
}

// Release gives the location's lease back. It is safe to call from any
// goroutine and more than once.
func (l *Location) Release() {
	l.once.Do(func() {
		if l.o != nil {
			l.t.release(l.o)
		}
	})
}

// Location returns the current sample's location with its own lease.
func (it *Iterator) Location() (*Location, error) {
	if it.cur == nil {
		return nil, errors.New("stream: Location called without a current sample")
	}
	off, n, err := it.cur.r.Span(it.j)
	if err != nil {
		return nil, fmt.Errorf("stream: sample %d: %w", it.id, err)
	}
	if l := it.cur.lease; l != nil {
		// Consumers open Path themselves: it must be in place.
		if err := l.Committed(it.ctx); err != nil {
			return nil, fmt.Errorf("stream: sample %d: %w", it.id, err)
		}
	}
	it.d.table.ref(it.cur)
	return &Location{Sample: it.id, Shard: it.cur.shard, Index: it.j, Path: it.cur.path,
		Offset: off, Length: n, t: it.d.table, o: it.cur}, nil
}

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
// The walk is advanced by whoever frees a download slot or moves the
// consumer: the consumer's own goroutine when it moves (walk), this
// goroutine when a lazy plan's IDs come into view, and each fetch itself,
// on its own goroutine, once its bytes are written (PrefetchFunc). The
// next download thus starts without any goroutine waking up first. With
// a loop that alone started downloads, woken when a slot freed, a traced
// BenchmarkColdS3 at load ~10 showed 2-8 ms between a download's end and
// the next one's start, of 10-25 ms per 4 MB shard.
func (it *Iterator) prefetch(ctx context.Context) {
	pf := it.pf
	defer func() {
		pf.mu.Lock()
		pf.stopped = true
		it.noteAhead(-int64(pf.w.Ahead()))
		pf.mu.Unlock()
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-it.progress: // a lazy plan's remaining IDs are in view
		}
		if it.turns != nil {
			continue // taking turns, the walk runs in the turns alone
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
	pf.wp.it = it
	pf.wp.retryAt.Store(-1)
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

	mu      sync.Mutex
	w       *prefetch.Walk
	wp      walkPlan
	stopped bool // the prefetch goroutine returned: start nothing more
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
	for pf.inflight.Load() < pf.conc {
		at, shard, ok := w.Next(wp, pos, n, budget)
		if !ok {
			return
		}
		ref := it.d.shards[shard]
		st := it.d.streams[ref.stream]
		w.Fetched(at)
		it.noteAhead(1)
		pf.inflight.Add(1)
		// The callback runs on the fetch's goroutine (or here, at once,
		// for a shard whose bytes are written already).
		st.cds.Via(st.bucket).PrefetchFunc(ref.local, at-pos, func(err error) {
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
			if it.turns == nil {
				// (Taking turns, the walk runs in the turns alone: a
				// fetch's end comes at a time the order does not set.)
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
