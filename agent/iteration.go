package agent

import (
	"context"
	"errors"
	"io"
	"runtime"
	"time"
)

// iterBuffer is how many leased locations an iteration keeps ready ahead of
// the client's requests. The stream's prefetcher works further ahead on
// whole shards; this only hides the hop between goroutines.
const iterBuffer = 1024

// iteration runs a locIterator in its own goroutine, so that a request can
// wait for data with a deadline and a closed connection can stop it at once.
type iteration struct {
	ch     chan location
	done   chan struct{} // closed when the producer has exited
	err    error         // the producer's error; read after done is closed
	cancel context.CancelFunc
}

func startIteration(li locIterator) *iteration {
	ctx, cancel := context.WithCancel(context.Background())
	it := &iteration{ch: make(chan location, iterBuffer), done: make(chan struct{}), cancel: cancel}
	go it.run(ctx, li)
	return it
}

func (it *iteration) run(ctx context.Context, li locIterator) {
	defer close(it.done)
	defer func() {
		if err := li.close(); err != nil && it.err == nil && ctx.Err() == nil {
			it.err = err
		}
	}()
	for {
		l, err := li.next(ctx)
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			if ctx.Err() == nil {
				it.err = err
			}
			return
		}
		select {
		case it.ch <- l:
		case <-ctx.Done():
			l.release()
			return
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
