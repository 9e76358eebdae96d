package agent

import (
	"context"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/sluicedata/sluice/stream"
)

// iterBuffer is how many leased locations an iteration keeps ready ahead of
// the client's requests. The stream's prefetcher works further ahead on
// whole shards; this only hides the hop between goroutines.
const iterBuffer = 1024

// location is one sample's place in the node cache. Its shard stays leased
// until release is called.
type location struct {
	sample int64
	shard  int
	path   string // absolute path of the raw, uncompressed shard file
	size   int64  // size of that file in bytes
	offset int64  // of the sample's record in the file
	length int64  // of the record
	// rec is a copy of the record when the location holds no lease (read
	// ahead under a cache limit, see iteration_ahead.go); path and offset
	// are then unset.
	rec []byte
	// blk is the block rec was cut from (iteration_ahead.go): a reply
	// that wrote rec calls its done.
	blk *copyBlock
	// mem is the memory file the location's copy is in
	// (iteration_map.go), nil for the others: size and offset name it
	// there (path is unset), and release drops the copy.
	mem *mapper
	// schema is the record layout of a copy in a memory file (its
	// shard's, or -1-shard where not known): a reply lists the copies of
	// one layout in one file as one shard (conn_reply.go).
	schema int
	// release drops the lease; it must be called exactly once.
	release func()
}

// iteration runs a stream.Iterator in its own goroutine, so that a request
// can wait for data with a deadline and a closed connection can stop it at
// once.
type iteration struct {
	ch     chan location
	done   chan struct{} // closed when the producer has exited
	err    error         // the producer's error; read after done is closed
	cancel context.CancelFunc
	// taken is signalled (without blocking) each time take dequeues.
	taken chan struct{}
	// copied counts the bytes of copied records (location.rec, or
	// mapped) in ch.
	copied atomic.Int64
	// copies says the producer copies records ahead (a cache limit):
	// only then does a client's MapCopies make a memory file.
	copies bool
	// mapped is the memory file copies are written to once the client
	// asked to map them (agentapi.Next.MapCopies, iteration_map.go); the
	// connection set it and takes it back when the iteration ends.
	mapped atomic.Pointer[mapper]
	// takenN counts the locations taken by takes that have returned: the
	// producer starts a leased run only once every earlier one is taken
	// so, never while a take is draining the buffer, so that one reply
	// carries the leases of at most one run (iteration_ahead.go).
	takenN atomic.Int64
	// filling is set while a take waits for the producer to add to a
	// short reply (fill), stalled while the producer waits for a take;
	// pushed wakes the take: the producer signals it after each push, and
	// when it stalls, while filling is set.
	filling, stalled atomic.Bool
	pushed           chan struct{}
	wantN, wantBytes atomic.Int64 // what would fill that reply: locations, bytes of copies

}

// iterShards is what an iteration's replies say of the dataset's shards.
type iterShards struct {
	sizes   []int64 // each shard's raw file size
	schemas []int   // each shard's record layout (agentapi.Opened.ShardSchema)
}

// startIteration starts the iteration of one worker of ep, dropping its
// first skip samples. With ahead
// > 0 (the cache has a limit), the iteration's buffer holds leased
// locations of at most ahead runs of a shard the client has not finished
// taking, and with readAhead copies of the records past them where no
// download is needed (see iteration_ahead.go); 0 means no bound, every
// location leased. m, if not nil, is the memory file of its mapped copies
// (agentapi.Begin.MapCopies; else the first Next that asks sets one).
func startIteration(ep *stream.Epoch, worker int, skip int64, shards iterShards, ahead int, readAhead bool, m *mapper) (*iteration, error) {
	ctx, cancel := context.WithCancel(context.Background())
	sit, err := ep.Iter(ctx, worker)
	if err != nil {
		cancel()
		return nil, err
	}
	it := &iteration{ch: make(chan location, iterBuffer), done: make(chan struct{}), cancel: cancel,
		taken: make(chan struct{}, 1), pushed: make(chan struct{}, 1), copies: ahead > 0 && readAhead}
	if m != nil {
		it.mapped.Store(m)
	}
	go it.run(ctx, sit, skip, &producer{it: it, sizes: shards.sizes, schemas: shards.schemas, ahead: ahead, copy: readAhead, run: -1,
		free: make(chan *copyBlock, copyFree)})
	return it, nil
}

func (it *iteration) run(ctx context.Context, sit *stream.Iterator, skip int64, p *producer) {
	defer close(it.done)
	defer sit.Close()
	// The skipped samples were delivered before (a client resuming after
	// an agent crash): pass over them without fetching their shards, so
	// the replay never competes for cache space with live leases.
	if skip > 0 && sit.Skip(skip) < skip {
		if err := sit.Err(); err != nil && ctx.Err() == nil {
			it.err = err
		}
		return
	}
	for p.advance(ctx, sit) && sit.Next() {
		if !p.push(ctx, sit) {
			return
		}
	}
	if err := sit.Err(); err != nil && ctx.Err() == nil {
		it.err = err
	}
}

// take returns up to n locations. It waits up to wait for the first; when
// none arrives it returns none and done false. At the end of the iteration
// it returns done true, or the producer's error.
func (it *iteration) take(ctx context.Context, n int, wait time.Duration) ([]location, bool, error) {
	start := time.Now()
	// Sized to what is buffered now: a reply takes about that much, and
	// growing the slice by appends copied every location twice.
	out := make([]location, 0, min(n, len(it.ch)+1))
	select {
	case l := <-it.ch:
		out = append(out, l)
	default:
		timer := time.NewTimer(wait)
		defer timer.Stop()
		select {
		case l := <-it.ch:
			out = append(out, l)
		case <-it.done:
			select {
			case l := <-it.ch:
				out = append(out, l)
			default:
				return nil, it.err == nil, it.err
			}
		case <-timer.C:
			return nil, false, nil
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
	}
	signal := func() {
		select {
		case it.taken <- struct{}{}:
		default:
		}
	}
	defer func() {
		it.takenN.Add(int64(len(out)))
		signal()
	}()
	// Copied records are counted out of the buffer as they leave it, and a
	// reply carries at most about copyBudget bytes of them (mapBudget
	// when they are mapped).
	var copied int64
	count := func(l location) {
		if l.rec != nil || l.mem != nil {
			copied += l.length
			it.copied.Add(-l.length)
		}
	}
	count(out[0])
	budget := it.budget()
	drain := func() {
		for len(out) < n && copied < budget {
			select {
			case l := <-it.ch:
				count(l)
				out = append(out, l)
			default:
				return
			}
		}
	}
	drain()
	if len(out) < n && copied < budget {
		if left := wait - time.Since(start); it.copies && left > 0 {
			// Under a limit the producer is slower than the client, so
			// what is buffered is what it made during the last reply.
			it.fill(ctx, func() (int, int64) { drain(); return n - len(out), budget - copied }, left)
		} else {
			// Give the producer one chance to refill before answering with
			// a short batch: short batches cost the client a round trip
			// each.
			signal()
			runtime.Gosched()
			drain()
		}
	}
	return out, false, nil
}

// fillWait bounds how long a take waits for the producer to fill a short
// reply (fill).
const fillWait = 2 * time.Millisecond

// fill waits while the producer adds to a short reply, calling room after
// each wake to drain the buffer into the reply and say what the reply has
// room for (locations, bytes of copies), until it is full, the producer
// stalls (it waits for a take, see producer.stall) or ends, fillWait
// passed without a location added, or wait (what is left of the
// request's) passed.
//
// Under a cache limit the producer copies each record it reads ahead, so
// it is slower than a client reading the copies from its mapping, and a
// take that answered with what was buffered answered with what the
// producer made during the client's last reply: 100 KB records came ~15 a
// reply (BenchmarkAgentWarmShuffled/100KB/limited-map), and each reply
// cost both sides system calls, wakeups and its header's coding. The
// producer keeps copying while the client reads the reply, so waiting
// costs the client no throughput, only the first reply's latency. The
// producer wakes the take once the buffer would fill the reply (wantN,
// wantBytes), or when it stalls, not at each location.
func (it *iteration) fill(ctx context.Context, room func() (int, int64), wait time.Duration) {
	deadline := time.Now().Add(wait)
	timer := time.NewTimer(min(wait, fillWait))
	defer timer.Stop()
	defer it.filling.Store(false)
	n, bytes := room()
	for n > 0 && bytes > 0 {
		it.wantN.Store(int64(n))
		it.wantBytes.Store(bytes)
		it.filling.Store(true)
		if it.stalled.Load() {
			room()
			return
		}
		select {
		case <-it.pushed:
			n, bytes = room()
		case <-it.done:
			room()
			return
		case <-timer.C:
			// No wake for fillWait: wait on only while the producer
			// moves (a loaded machine, or the race detector, slows it).
			was := n
			n, bytes = room()
			left := time.Until(deadline)
			if n == was || left <= 0 {
				return
			}
			timer.Reset(min(left, fillWait))
		case <-ctx.Done():
			return
		}
	}
}

// wake wakes a take waiting in fill once the buffer would fill its
// reply, or (stalled) at once.
func (it *iteration) wake(stalled bool) {
	if !it.filling.Load() {
		return
	}
	if !stalled && int64(len(it.ch)) < it.wantN.Load() && it.copied.Load() < it.wantBytes.Load() {
		return
	}
	select {
	case it.pushed <- struct{}{}:
	default:
	}
}

// budget bounds the bytes of copies the iteration buffers and a reply
// carries: copyBudget, or mapBudget once its copies are mapped
// (iteration_map.go; off is set before the mapper is shared, never
// after).
func (it *iteration) budget() int64 {
	if it.mapping() {
		return mapBudget
	}
	return copyBudget
}

// mapping says the iteration's copies go to a memory file the client maps.
func (it *iteration) mapping() bool {
	m := it.mapped.Load()
	return m != nil && !m.off
}

// stop ends the producer and releases every location it had buffered.
func (it *iteration) stop() {
	it.cancel()
	<-it.done
	for {
		select {
		case l := <-it.ch:
			l.release()
		default:
			return
		}
	}
}
