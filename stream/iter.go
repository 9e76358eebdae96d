package stream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/plan"
)

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
		if t != nil && t.g.beforeMap != nil {
			t.g.beforeMap()
		}
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
			if it.turns != nil {
				it.touch(shard) // the eviction order's last use, in the turn
			}
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
				if err == nil {
					it.leased(shard) // held by the lease now: the walk's pin goes
				}
			}
			if err != nil {
				it.addWait(start)
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
			// The consumer's wait includes the prefetch walk, which runs
			// here on its goroutine: under a cache limit its admissions
			// and evictions (and the cache's lock) took most of a loop's
			// input wait, which the figure left out (3.4 s of 33 s).
			it.addWait(start)
		} else if it.turns != nil {
			it.turns.seq++ // a sample passed without a shard change
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

// addWait counts the time since start as the consumer's wait, in its
// figures and the dataset's.
func (it *Iterator) addWait(start time.Time) {
	w := int64(time.Since(start))
	it.stats.wait.Add(w)
	it.d.stats.wait.Add(w)
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
	it.addWait(start)
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
		it.turnClose()
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
	tw   *workerTurns // the iterator's turns, told of the release (nil: none)
	once sync.Once
}

// Release gives the location's lease back. It is safe to call from any
// goroutine and more than once.
func (l *Location) Release() {
	l.once.Do(func() {
		if l.o != nil {
			l.t.release(l.o)
		}
		if l.tw != nil {
			l.tw.handBack()
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
	if it.turns != nil {
		it.turns.hand()
	}
	return &Location{Sample: it.id, Shard: it.cur.shard, Index: it.j, Path: it.cur.path,
		Offset: off, Length: n, t: it.d.table, o: it.cur, tw: it.turns}, nil
}
