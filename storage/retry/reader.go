package retry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicedata/sluice/storage"
)

// NewRangeReader implements storage.Bucket. Opening is retried, and the
// returned reader resumes after failures and stalls.
func (b *Bucket) NewRangeReader(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	if off < 0 {
		return nil, fmt.Errorf("retry: get %s: negative offset %d", b.inner.URL(key), off)
	}
	r := &reader{b: b, ctx: ctx, key: key, url: b.inner.URL(key), off: off, remaining: length}
	if err := r.open(); err != nil {
		return nil, err
	}
	return r, nil
}

// reader is a resuming body. It holds the context of its request (it is a
// per-request object).
type reader struct {
	b         *Bucket
	ctx       context.Context
	key, url  string
	off       int64 // next byte to deliver
	remaining int64 // bytes still wanted; negative: to the end
	failures  int   // consecutive failed attempts without progress
	lastErr   error

	cur   io.ReadCloser // current body; nil between attempts
	opens int           // bodies opened
	// prev is a body checked against the object's checksum that broke:
	// the next body continues its check (storage.ResumableCheck).
	prev io.Reader
	// info is what the first body's response told of the object.
	info    storage.ObjectInfo
	hasInfo bool
	cancel  context.CancelFunc // ends the current attempt's context
	timer   *time.Timer        // stall and open timeouts
	fired   atomic.Bool        // the timer ended the current attempt
	err     error              // sticky
	closed  bool
	mu      sync.Mutex // guards cancel against the timer
}

// arm starts the timer that aborts the current attempt after d.
func (r *reader) arm(d time.Duration) {
	if d < 0 {
		return
	}
	r.fired.Store(false)
	if r.timer == nil {
		r.timer = time.AfterFunc(d, r.abort)
	} else {
		r.timer.Reset(d)
	}
}

// disarm stops the timer and reports whether it fired.
func (r *reader) disarm() bool {
	if r.timer != nil {
		r.timer.Stop()
	}
	return r.fired.Load()
}

func (r *reader) abort() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fired.Store(true)
	if r.cancel != nil {
		r.cancel()
	}
}

// open (re)opens the body at r.off, retrying within the budget.
func (r *reader) open() error {
	for {
		if r.failures > 0 {
			if err := r.b.wait(r.ctx, "get", r.url, r.failures, r.lastErr); err != nil {
				return err
			}
		}
		actx, cancel := context.WithCancel(r.ctx)
		r.mu.Lock()
		r.cancel = cancel
		r.mu.Unlock()
		r.arm(r.b.opts.AttemptTimeout)
		body, err := r.b.inner.NewRangeReader(actx, r.key, r.off, r.remaining)
		fired := r.disarm()
		if err == nil && fired {
			// The timeout fired as the response arrived; its context is
			// gone, so the body is unusable.
			_ = body.Close()
			err = errAttemptTimeout
		}
		if err == nil {
			if r.prev != nil {
				// The rest of a checked body: checked with the bytes
				// already delivered, so that damage in either request
				// is still caught at the object's end.
				body = &continued{Reader: storage.ContinueCheck(r.prev, body), Closer: body}
				r.prev = nil
			}
			r.cur = body
			if r.opens == 0 {
				r.info, r.hasInfo = storage.ReaderInfo(body)
			}
			r.opens++
			return nil
		}
		cancel()
		var aborted error
		if fired {
			aborted = errAttemptTimeout
		}
		err, again := r.b.classify(r.ctx, err, aborted)
		if !again {
			return err
		}
		r.failures++
		r.lastErr = err
	}
}

// ObjectInfo implements storage.InfoReader: what the first response told
// of the object, unless the read was resumed from another request (which
// may have read another version).
func (r *reader) ObjectInfo() (storage.ObjectInfo, bool) {
	if r.opens != 1 {
		return storage.ObjectInfo{}, false
	}
	return r.info, r.hasInfo
}

// Read implements io.Reader.
func (r *reader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if r.closed {
		return 0, fmt.Errorf("retry: read %s: reader closed", r.url)
	}
	if len(p) == 0 {
		return 0, nil
	}
	for {
		if r.remaining == 0 {
			return 0, io.EOF
		}
		if r.cur == nil {
			if err := r.open(); err != nil {
				r.err = err
				return 0, err
			}
		}
		if r.remaining > 0 && int64(len(p)) > r.remaining {
			p = p[:r.remaining]
		}
		r.arm(r.b.opts.StallTimeout)
		n, err := r.cur.Read(p)
		stalled := r.disarm()
		if n > 0 {
			r.off += int64(n)
			if r.remaining > 0 {
				r.remaining -= int64(n)
			}
			r.failures = 0
		}
		if err == nil || err == io.EOF {
			return n, err
		}
		if errors.Is(err, storage.ErrChecksum) {
			// The bytes already read were damaged: resuming after them
			// would deliver them as the object.
			r.err = fmt.Errorf("retry: read %s: %w", r.url, err)
			return n, r.err
		}
		var aborted error
		if stalled {
			aborted = errStalled
		}
		err, again := r.b.classify(r.ctx, err, aborted)
		if !again {
			r.err = err
			return n, err
		}
		if _, ok := r.cur.(storage.ResumableCheck); ok {
			r.prev = r.cur
		}
		r.drop()
		r.failures++
		r.lastErr = fmt.Errorf("read at byte %d: %w", r.off, err)
		if n > 0 {
			return n, nil // resume on the next Read
		}
	}
}

// continued is the body that resumes a checked one: Reader checks it as
// the continuation, Closer closes the response.
type continued struct {
	io.Reader
	io.Closer
}

// ContinueCheck implements storage.ResumableCheck, for a body that breaks
// again.
func (c *continued) ContinueCheck(rest io.Reader) io.Reader {
	return storage.ContinueCheck(c.Reader, rest)
}

// drop closes the current body.
func (r *reader) drop() {
	if r.cur == nil {
		return
	}
	r.mu.Lock()
	r.cancel()
	r.mu.Unlock()
	_ = r.cur.Close() // a broken body; its Close error adds nothing
	r.cur = nil
}

// Close implements io.Closer.
func (r *reader) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	if r.timer != nil {
		r.timer.Stop()
	}
	if r.cur == nil {
		return nil
	}
	err := r.cur.Close()
	r.mu.Lock()
	r.cancel()
	r.mu.Unlock()
	r.cur = nil
	return err
}
