// Package stack puts the standard decorators around a storage.Bucket: a
// bound on requests in flight (storage/limit) under retries with backoff,
// Retry-After, stall detection and a retry budget (storage/retry). It is
// the one decorator stack every path that opens a store uses:
// internal/stores registers every driver through Opener, and stream wraps
// any Bucket a caller's own Registry returns undecorated.
//
// Per-open tuning travels in the context (WithOptions), so that a
// Registry built once can open each store with its caller's policy (the
// attempt timeout of a dataset's download_timeout, short backoffs in
// tests) without any path being able to open a store undecorated.
package stack

import (
	"context"
	"fmt"
	"net/url"

	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/limit"
	"github.com/sluicedata/sluice/storage/retry"
)

// DefaultMaxInFlight is the bound on requests in flight to one store when
// Options.MaxInFlight is zero.
const DefaultMaxInFlight = 64

// Options tunes the stack. A nil *Options means the defaults.
type Options struct {
	// MaxInFlight bounds the requests in flight to the store. Zero means
	// DefaultMaxInFlight; negative means no bound.
	MaxInFlight int
	// Retry is the retry policy; nil means retry's defaults (10 attempts,
	// backoff from 100ms doubling to 20s with jitter, at least 1s after
	// throttling, Retry-After honoured up to 2m, 1m attempt timeout, 30s
	// stall timeout).
	Retry *retry.Options
	// Inner, when set, wraps the store before the decorators go around
	// it, so that what it adds sees every attempt of a retried request
	// (the agent's store metrics).
	Inner func(storage.Bucket) storage.Bucket
}

// Key returns a string that two Options share exactly when they set the
// same bound on requests in flight and the same retry policy figures
// (attempts, backoffs, Retry-After cap, attempt and stall timeouts), for
// callers that keep decorated stores open and must not hand a store
// decorated under one policy to a caller asking for another (the agent's
// store pool). The function hooks (Sleep, Jitter, Retryable, OnRetry)
// count only by whether they are set: functions cannot be compared. A nil
// *Options has the key of the defaults given explicitly as zero values.
func (o *Options) Key() string {
	var v Options
	if o != nil {
		v = *o
	}
	var r retry.Options
	if v.Retry != nil {
		r = *v.Retry
	}
	set := func(ok bool) int {
		if ok {
			return 1
		}
		return 0
	}
	return fmt.Sprintf("inflight=%d attempts=%d backoff=%d,%d,%d retryafter=%d attempt=%d stall=%d hooks=%d%d%d%d%d",
		v.MaxInFlight, r.MaxAttempts, r.InitialBackoff, r.MaxBackoff, r.ThrottleBackoff, r.MaxRetryAfter,
		r.AttemptTimeout, r.StallTimeout, set(r.Sleep != nil), set(r.Jitter != nil), set(r.Retryable != nil), set(r.OnRetry != nil),
		set(v.Inner != nil))
}

// Wrap returns b inside the standard decorators. A Bucket that Wrap
// already decorated is returned as it is. On error b is closed.
func Wrap(b storage.Bucket, opts *Options) (storage.Bucket, error) {
	if Wrapped(b) {
		return b, nil
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.MaxInFlight == 0 {
		o.MaxInFlight = DefaultMaxInFlight
	}
	if o.Inner != nil {
		b = o.Inner(b)
	}
	inner := b
	if o.MaxInFlight > 0 {
		lb, err := limit.New(b, o.MaxInFlight)
		if err != nil {
			b.Close()
			return nil, fmt.Errorf("stack: %w", err)
		}
		inner = lb
	}
	rb, err := retry.New(inner, o.Retry)
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("stack: %w", err)
	}
	return rb, nil
}

// Wrapped reports whether b is already decorated by the stack: it is the
// retry decorator, or a layer that reveals it underneath with
// Unwrap() storage.Bucket (a pool's handle, say). The limit decorator
// alone does not count: it has no retries.
func Wrapped(b storage.Bucket) bool {
	for b != nil {
		if _, ok := b.(*retry.Bucket); ok {
			return true
		}
		if _, ok := b.(*limit.Bucket); ok {
			return false
		}
		u, ok := b.(interface{ Unwrap() storage.Bucket })
		if !ok {
			return false
		}
		b = u.Unwrap()
	}
	return false
}

type ctxKey struct{}

// WithOptions returns ctx carrying opts for the stores opened with it
// through an Opener.
func WithOptions(ctx context.Context, opts *Options) context.Context {
	return context.WithValue(ctx, ctxKey{}, opts)
}

// OptionsFrom returns the Options ctx carries; nil when none.
func OptionsFrom(ctx context.Context) *Options {
	o, _ := ctx.Value(ctxKey{}).(*Options)
	return o
}

// Opener returns an Opener that opens with o and wraps the Bucket with
// the Options ctx carries (see WithOptions).
func Opener(o storage.Opener) storage.Opener {
	return func(ctx context.Context, u *url.URL) (storage.Bucket, error) {
		b, err := o(ctx, u)
		if err != nil {
			return nil, err
		}
		return Wrap(b, OptionsFrom(ctx))
	}
}
