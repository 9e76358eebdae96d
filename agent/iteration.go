package agent

import (
	"context"
	"runtime"
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
}

// startIteration starts the iteration of one worker of ep, dropping its
// first skip samples. sizes gives each shard's raw file size. With ahead
// > 0 (the cache has a limit), the iteration's buffer holds locations of
// at most ahead shards the client has not finished taking (see run); 0
// means no bound.
func startIteration(ep *stream.Epoch, worker int, skip int64, sizes []int64, ahead int) (*iteration, error) {
	ctx, cancel := context.WithCancel(context.Background())
	sit, err := ep.Iter(ctx, worker)
	if err != nil {
		cancel()
		return nil, err
	}
	it := &iteration{ch: make(chan location, iterBuffer), done: make(chan struct{}), cancel: cancel,
		taken: make(chan struct{}, 1)}
	go it.run(ctx, sit, skip, sizes, ahead)
	return it, nil
}

func (it *iteration) run(ctx context.Context, sit *stream.Iterator, skip int64, sizes []int64, ahead int) {
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
	lastShard := -1
	var pushed int64 // locations sent to the buffer
	var ends []int64 // for each earlier shard still in the buffer, pushed at its end
	for sit.Next() {
		loc, err := sit.Location()
		if err != nil {
			it.err = err
			return
		}
		// Under a cache limit, the buffer holds at most ahead shards the
		// client has not finished taking: every buffered location holds a
		// lease, and leases that run far ahead on every worker can fill the
		// limit so that another worker's next shard never finds room. The
		// agent passes 1 under a limit (see begin).
		if ahead > 0 && loc.Shard != lastShard && lastShard >= 0 {
			ends = append(ends, pushed)
			if !it.waitShards(ctx, &ends, pushed, ahead) {
				loc.Release()
				return
			}
		}
		lastShard = loc.Shard
		var size int64
		if loc.Shard >= 0 && loc.Shard < len(sizes) {
			size = sizes[loc.Shard]
		}
		l := location{sample: loc.Sample, shard: loc.Shard, path: loc.Path, size: size,
			offset: loc.Offset, length: loc.Length, release: loc.Release}
		select {
		case it.ch <- l:
			pushed++
		case <-ctx.Done():
			l.release()
			return
		}
	}
	if err := sit.Err(); err != nil && ctx.Err() == nil {
		it.err = err
	}
}

// waitShards waits until fewer than ahead earlier shards still have
// locations in the buffer. ends holds, oldest first, the count of
// locations pushed when each such shard ended; the client has taken a
// shard's locations once pushed minus the buffer's length reaches its end.
// False when ctx ended first.
func (it *iteration) waitShards(ctx context.Context, ends *[]int64, pushed int64, ahead int) bool {
	for {
		taken := pushed - int64(len(it.ch))
		for len(*ends) > 0 && (*ends)[0] <= taken {
			*ends = (*ends)[1:]
		}
		if len(*ends) < ahead {
			return true
		}
		select {
		case <-it.taken:
		case <-ctx.Done():
			return false
		}
	}
}

// take returns up to n locations. It waits up to wait for the first; when
// none arrives it returns none and done false. At the end of the iteration
// it returns done true, or the producer's error.
func (it *iteration) take(ctx context.Context, n int, wait time.Duration) ([]location, bool, error) {
	var out []location
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
	defer func() {
		select {
		case it.taken <- struct{}{}:
		default:
		}
	}()
	yielded := false
	for len(out) < n {
		select {
		case l := <-it.ch:
			out = append(out, l)
			continue
		default:
		}
		if yielded {
			break
		}
		// Give the producer one chance to refill before answering with a
		// short batch: short batches cost the client a round trip each.
		yielded = true
		runtime.Gosched()
	}
	return out, false, nil
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
