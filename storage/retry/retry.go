// Package retry is a storage.Bucket decorator that repeats failed
// operations: capped exponential backoff with jitter, longer waits when the
// store throttles (HTTP 429, 503 SlowDown) and at least the delay a server
// asks for with Retry-After, a per-attempt timeout, and a stall timeout
// that aborts a body that stops flowing and resumes the read from the byte
// it reached.
//
// What is worth retrying is decided by storage.IsRetryable: missing
// objects, refused access, failed preconditions, invalid keys and the
// caller's own cancellation fail at once. Every operation has a budget of
// Options.MaxAttempts consecutive failed attempts; a reader that makes
// progress between failures starts its budget afresh. When the budget is
// spent the operation fails with an *Error that names the operation, the
// URL, the number of attempts and the last cause.
//
// # What is retried
//
//   - Stat, Delete and NewRangeReader are retried as a whole. A Delete
//     that, after a failed attempt, finds the object gone reports success:
//     the failed attempt most likely deleted it.
//   - The body of a reader is resumed: when a Read fails with a retryable
//     error, or stalls for Options.StallTimeout, the reader reopens the
//     object at the next unread byte and continues. The caller sees one
//     unbroken stream. A body that fails the store's checksum
//     (storage.ErrChecksum) is not resumed: its damaged bytes were
//     already read, so the read fails, and the caller reads the object
//     again (storage.ReadAll and the cache's downloads do). A checked
//     body that breaks for another reason is resumed with its check
//     carried over to the rest (storage.ResumableCheck), so that the
//     object is still checked whole at its end.
//   - List is retried, and skips the keys it already passed to fn (List
//     delivers keys in order), so fn still sees each key once. An error
//     from fn is returned at once. A listing that makes progress between
//     failures starts its budget afresh.
//   - Upload (the storage.Uploader capability, used by storage.Upload and
//     storage.UploadFile) repeats the whole upload from its replayable
//     source. No attempt timeout applies to it (its length depends on the
//     object's size); bound it with the context.
//   - NewWriter is not retried: a stream cannot be replayed. Writers whose
//     source can be read again should use storage.Upload.
//
// A Bucket is safe for concurrent use; readers are not.
package retry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/sluicedata/sluice/storage"
)

// Options tunes the retry policy. A nil *Options means the defaults.
type Options struct {
	// MaxAttempts is the number of consecutive failed attempts after which
	// an operation gives up, counting the first. Zero means 10; one
	// disables retries.
	MaxAttempts int
	// InitialBackoff is the nominal wait after the first failure; it
	// doubles with each further failure. Zero means 100ms.
	InitialBackoff time.Duration
	// MaxBackoff caps the nominal wait. Zero means 20s.
	MaxBackoff time.Duration
	// ThrottleBackoff is the least nominal wait after the store throttled
	// (storage.IsThrottled). Zero means 1s.
	ThrottleBackoff time.Duration
	// MaxRetryAfter caps the delay a server may ask for with Retry-After;
	// a longer request is shortened to it. Zero means 2m.
	MaxRetryAfter time.Duration
	// AttemptTimeout bounds each attempt of Stat, Delete and List, and the
	// time NewRangeReader (or a resume) waits for the response to begin.
	// Zero means 1m; negative means none.
	AttemptTimeout time.Duration
	// StallTimeout aborts a Read that receives no byte for this long; the
	// reader then resumes from the next byte. Zero means 30s; negative
	// means none.
	StallTimeout time.Duration
	// Sleep waits for d or until ctx is done, returning ctx's error in
	// that case. Nil means a real timer; tests inject a fake.
	Sleep func(ctx context.Context, d time.Duration) error
	// Jitter turns a nominal wait into the actual one. Nil means a uniform
	// random duration in [d/2, d].
	Jitter func(d time.Duration) time.Duration
	// Retryable classifies errors. Nil means storage.IsRetryable.
	Retryable func(error) bool
	// OnRetry, when not nil, is called before each wait with what failed
	// (for logs and metrics). It may be called from several goroutines.
	OnRetry func(Event)
}

// Event describes a failed attempt that will be retried.
type Event struct {
	Op      string        // "stat", "get", "read", "list", "delete", "upload"
	URL     string        // the object or prefix
	Attempt int           // the attempt that failed, from 1
	Err     error         // its error
	Delay   time.Duration // the wait before the next attempt
	// Cause classifies Err: CauseThrottled, CauseTimeout, CauseStall,
	// CauseServer or CauseOther (see Cause).
	Cause string
}

func (o *Options) withDefaults() (Options, error) {
	var d Options
	if o != nil {
		d = *o
	}
	if d.MaxAttempts < 0 || d.InitialBackoff < 0 || d.MaxBackoff < 0 ||
		d.ThrottleBackoff < 0 || d.MaxRetryAfter < 0 {
		return d, errors.New("retry: negative option")
	}
	if d.MaxAttempts == 0 {
		d.MaxAttempts = 10
	}
	if d.InitialBackoff == 0 {
		d.InitialBackoff = 100 * time.Millisecond
	}
	if d.MaxBackoff == 0 {
		d.MaxBackoff = 20 * time.Second
	}
	if d.ThrottleBackoff == 0 {
		d.ThrottleBackoff = time.Second
	}
	if d.MaxRetryAfter == 0 {
		d.MaxRetryAfter = 2 * time.Minute
	}
	if d.AttemptTimeout == 0 {
		d.AttemptTimeout = time.Minute
	}
	if d.StallTimeout == 0 {
		d.StallTimeout = 30 * time.Second
	}
	if d.Sleep == nil {
		d.Sleep = sleep
	}
	if d.Jitter == nil {
		d.Jitter = jitter
	}
	if d.Retryable == nil {
		d.Retryable = storage.IsRetryable
	}
	return d, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func jitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d/2+1)
}

// Error is returned when an operation has spent its retry budget.
type Error struct {
	Op       string // the operation
	URL      string // the object or prefix
	Attempts int    // attempts made
	Err      error  // the last attempt's error
}

// Error implements error.
func (e *Error) Error() string {
	return fmt.Sprintf("retry: %s %s: giving up after %d attempts: %v", e.Op, e.URL, e.Attempts, e.Err)
}

// Unwrap returns the last attempt's error.
func (e *Error) Unwrap() error { return e.Err }

// errStalled marks an attempt aborted by the stall timeout.
var errStalled = errors.New("no data received within the stall timeout")

// errAttemptTimeout marks an attempt aborted by the attempt timeout.
var errAttemptTimeout = errors.New("attempt timed out")

// errAttemptAborted marks an attempt that ended with a context error while
// the caller's context was still live.
var errAttemptAborted = errors.New("attempt aborted")

// Bucket is the retrying decorator. It is safe for concurrent use.
type Bucket struct {
	inner storage.Bucket
	opts  Options
}

var (
	_ storage.Bucket   = (*Bucket)(nil)
	_ storage.Uploader = (*Bucket)(nil)
)

// New returns b wrapped with retries. opts may be nil.
func New(b storage.Bucket, opts *Options) (*Bucket, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Bucket{inner: b, opts: o}, nil
}

// Unwrap returns the wrapped Bucket.
func (b *Bucket) Unwrap() storage.Bucket { return b.inner }

// URL implements storage.Bucket.
func (b *Bucket) URL(key string) string { return b.inner.URL(key) }

// Close implements storage.Bucket.
func (b *Bucket) Close() error { return b.inner.Close() }

// delay returns the wait after the failure-th consecutive failure.
func (b *Bucket) delay(failure int, err error) time.Duration {
	d := b.opts.InitialBackoff
	for i := 1; i < failure && d < b.opts.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, b.opts.MaxBackoff)
	if storage.IsThrottled(err) {
		d = max(d, b.opts.ThrottleBackoff)
	}
	d = b.opts.Jitter(d)
	if ra := storage.RetryAfter(err); ra > 0 {
		d = max(d, min(ra, b.opts.MaxRetryAfter))
	}
	return d
}

// attemptCtx derives the context of one attempt, with the attempt timeout.
// timedOut reports whether the timeout (not the parent) ended it.
func (b *Bucket) attemptCtx(ctx context.Context) (actx context.Context, cancel context.CancelFunc, timedOut func() bool) {
	if b.opts.AttemptTimeout < 0 {
		c, cancel := context.WithCancel(ctx)
		return c, cancel, func() bool { return false }
	}
	c, cancel := context.WithTimeoutCause(ctx, b.opts.AttemptTimeout, errAttemptTimeout)
	return c, cancel, func() bool { return context.Cause(c) == errAttemptTimeout && ctx.Err() == nil }
}

// classify decides what to do after a failed attempt. It returns the error
// to report and whether to retry.
func (b *Bucket) classify(ctx context.Context, err error, aborted error) (error, bool) {
	if ctx.Err() != nil {
		// The caller gave up; report its reason with the attempt's error.
		if errors.Is(err, ctx.Err()) {
			return err, false
		}
		return fmt.Errorf("%w (last error: %v)", ctx.Err(), err), false
	}
	if aborted != nil {
		// Our own timeout ended the attempt: the driver reports a context
		// error that IsRetryable would take for the caller's.
		return fmt.Errorf("%w: %v", aborted, err), true
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		// Not the caller's context, so an attempt's own (a timer that
		// fired as the call returned) or a driver's internal timeout. The
		// context error is not wrapped: it would read as the caller's.
		return fmt.Errorf("%w: %v", errAttemptAborted, err), true
	}
	return err, b.opts.Retryable(err)
}

// wait reports the failure and sleeps before the next attempt. It returns
// the error to give up with, or nil to go on.
func (b *Bucket) wait(ctx context.Context, op, url string, failures int, err error) error {
	if failures >= b.opts.MaxAttempts {
		if b.opts.MaxAttempts == 1 {
			return err
		}
		return &Error{Op: op, URL: url, Attempts: failures, Err: err}
	}
	d := b.delay(failures, err)
	if b.opts.OnRetry != nil {
		b.opts.OnRetry(Event{Op: op, URL: url, Attempt: failures, Err: err, Delay: d, Cause: Cause(err)})
	}
	if serr := b.opts.Sleep(ctx, d); serr != nil {
		return fmt.Errorf("%w (while waiting to retry after: %v)", serr, err)
	}
	return nil
}

// do runs fn until it succeeds, fails permanently or spends the budget.
func (b *Bucket) do(ctx context.Context, op, url string, fn func(ctx context.Context, attempt int) error) error {
	for failures := 0; ; {
		actx, cancel, timedOut := b.attemptCtx(ctx)
		err := fn(actx, failures+1)
		var aborted error
		if err != nil && timedOut() {
			aborted = errAttemptTimeout
		}
		cancel()
		if err == nil {
			return nil
		}
		err, again := b.classify(ctx, err, aborted)
		if !again {
			return err
		}
		failures++
		if err := b.wait(ctx, op, url, failures, err); err != nil {
			return err
		}
	}
}

// Stat implements storage.Bucket.
func (b *Bucket) Stat(ctx context.Context, key string) (storage.ObjectInfo, error) {
	var info storage.ObjectInfo
	err := b.do(ctx, "stat", b.inner.URL(key), func(ctx context.Context, _ int) error {
		var err error
		info, err = b.inner.Stat(ctx, key)
		return err
	})
	return info, err
}

// Delete implements storage.Bucket.
func (b *Bucket) Delete(ctx context.Context, key string) error {
	return b.do(ctx, "delete", b.inner.URL(key), func(ctx context.Context, attempt int) error {
		err := b.inner.Delete(ctx, key)
		if attempt > 1 && errors.Is(err, storage.ErrNotExist) {
			return nil
		}
		return err
	})
}

// List implements storage.Bucket. The attempt timeout bounds the wait for
// each next object (time spent in fn does not count), and an attempt that
// delivered new objects before failing starts the budget afresh.
func (b *Bucket) List(ctx context.Context, prefix string, fn func(storage.ObjectInfo) error) error {
	var (
		last     string
		started  bool
		fnErr    error
		failures int
	)
	url := b.inner.URL(prefix)
	for {
		actx, cancel := context.WithCancel(ctx)
		var fired atomic.Bool
		var timer *time.Timer
		if b.opts.AttemptTimeout > 0 {
			timer = time.AfterFunc(b.opts.AttemptTimeout, func() { fired.Store(true); cancel() })
		}
		progressed := false
		err := b.inner.List(actx, prefix, func(info storage.ObjectInfo) error {
			if started && info.Key <= last {
				return nil // passed on by an earlier attempt
			}
			if timer != nil {
				timer.Stop()
			}
			if err := fn(info); err != nil {
				fnErr = err
				return err
			}
			last, started, progressed = info.Key, true, true
			if timer != nil && !fired.Load() {
				timer.Reset(b.opts.AttemptTimeout)
			}
			return nil
		})
		if timer != nil {
			timer.Stop()
		}
		cancel()
		if fnErr != nil {
			return fnErr
		}
		if err == nil {
			return nil
		}
		var aborted error
		if fired.Load() {
			aborted = errAttemptTimeout
		}
		err, again := b.classify(ctx, err, aborted)
		if !again {
			return err
		}
		if progressed {
			failures = 0
		}
		failures++
		if err := b.wait(ctx, "list", url, failures, err); err != nil {
			return err
		}
	}
}

// Upload implements storage.Uploader: the whole upload is repeated from
// src after a retryable failure. No attempt timeout applies.
func (b *Bucket) Upload(ctx context.Context, key string, src io.ReaderAt, size int64, opts *storage.WriteOptions) error {
	for failures := 0; ; {
		err := storage.Upload(ctx, b.inner, key, src, size, opts)
		if err == nil {
			return nil
		}
		err, again := b.classify(ctx, err, nil)
		if !again {
			return err
		}
		failures++
		if err := b.wait(ctx, "upload", b.inner.URL(key), failures, err); err != nil {
			return err
		}
	}
}

// NewWriter implements storage.Bucket; writes are not retried (see the
// package documentation).
func (b *Bucket) NewWriter(ctx context.Context, key string, opts *storage.WriteOptions) (io.WriteCloser, error) {
	return b.inner.NewWriter(ctx, key, opts)
}
