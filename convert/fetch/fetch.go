// Package fetch downloads the objects that URL columns reference, for
// embedding into shards: a bounded pool of concurrent requests through the
// storage registry (http, https, s3, gs, az, file, and absolute local
// paths), per-host limits,
// retries with capped exponential backoff and jitter that honour
// Retry-After, a size cap, and an optional transform (image re-encoding).
//
// Failures are returned as *Error values whose Reason classifies them
// ("not_found", "http_500", "timeout", ...) so a caller can count them.
package fetch

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/sluicedata/sluice/storage"
)

// Defaults used when Options leaves a field zero.
const (
	DefaultConcurrency = 256
	DefaultPerHost     = 64
	DefaultAttempts    = 4
	DefaultBaseDelay   = 200 * time.Millisecond
	DefaultMaxDelay    = 10 * time.Second
	DefaultTimeout     = 60 * time.Second
	DefaultMaxBytes    = 256 << 20
)

// Options tunes a Fetcher. Only Registry is required.
type Options struct {
	// Registry opens the store a URL names. Required.
	Registry *storage.Registry
	// Concurrency bounds requests in flight over all hosts; zero means
	// DefaultConcurrency.
	Concurrency int
	// PerHost bounds requests in flight to one host (or bucket); zero
	// means DefaultPerHost.
	PerHost int
	// Attempts is the number of tries per object, first one included;
	// zero means DefaultAttempts.
	Attempts int
	// BaseDelay and MaxDelay shape the backoff between attempts: BaseDelay
	// doubled after each failure, capped at MaxDelay, with full jitter. A
	// server's Retry-After wins when longer. Zero means the defaults.
	BaseDelay, MaxDelay time.Duration
	// Timeout bounds one attempt; zero means DefaultTimeout.
	Timeout time.Duration
	// MaxBytes caps an object's size; larger objects fail with reason
	// "too_large". Zero means DefaultMaxBytes.
	MaxBytes int64
	// Transform, if set, is applied to every fetched object (for example
	// ImageTransform); its failures have reason "decode".
	Transform func([]byte) ([]byte, error)
}

// Error is a failed fetch.
type Error struct {
	// URL is the object that failed.
	URL string
	// Reason classifies the failure: not_found, forbidden, http_<code>,
	// timeout, too_large, bad_url, decode, network, canceled.
	Reason string
	// Attempts is the number of tries made.
	Attempts int
	// Err is the last cause.
	Err error
}

// Error formats the URL, reason, attempts and cause.
func (e *Error) Error() string {
	return fmt.Sprintf("fetch %s: %s after %d attempt(s): %v", e.URL, e.Reason, e.Attempts, e.Err)
}

// Unwrap returns the last cause.
func (e *Error) Unwrap() error { return e.Err }

// Fetcher fetches objects by URL. It is safe for concurrent use; Close
// releases the stores it opened.
type Fetcher struct {
	opts Options
	sem  chan struct{}

	// mu guards buckets and hosts.
	mu      sync.Mutex
	buckets map[string]storage.Bucket
	hosts   map[string]chan struct{}
	closed  bool

	// stats
	statMu  sync.Mutex
	retries int64
	fetched int64
	bytesIn int64
}

// New returns a Fetcher. opts must name a Registry.
func New(opts *Options) (*Fetcher, error) {
	if opts == nil || opts.Registry == nil {
		return nil, errors.New("fetch: Options.Registry is required")
	}
	o := *opts
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.PerHost <= 0 {
		o.PerHost = DefaultPerHost
	}
	if o.Attempts <= 0 {
		o.Attempts = DefaultAttempts
	}
	if o.BaseDelay <= 0 {
		o.BaseDelay = DefaultBaseDelay
	}
	if o.MaxDelay <= 0 {
		o.MaxDelay = DefaultMaxDelay
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	return &Fetcher{
		opts:    o,
		sem:     make(chan struct{}, o.Concurrency),
		buckets: map[string]storage.Bucket{},
		hosts:   map[string]chan struct{}{},
	}, nil
}

// Concurrency returns the bound on requests in flight.
func (f *Fetcher) Concurrency() int { return f.opts.Concurrency }

// Stats returns the number of successful fetches, their bytes, and the
// retries made so far.
func (f *Fetcher) Stats() (fetched, bytes, retries int64) {
	f.statMu.Lock()
	defer f.statMu.Unlock()
	return f.fetched, f.bytesIn, f.retries
}

// split maps a URL to the root its store opens at (scheme and host, plus
// the container for Azure) and the key under it.
func split(raw string) (root, key, host string, err error) {
	if !strings.Contains(raw, "://") {
		if !strings.HasPrefix(raw, "/") {
			return "", "", "", fmt.Errorf("not a URL or absolute path: %q", raw)
		}
		raw = "file://" + raw // an absolute local path
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", "", "", err
	}
	p := strings.TrimPrefix(u.Path, "/")
	root = u.Scheme + "://" + u.Host
	if u.Scheme == "az" || u.Scheme == "azure" {
		c, rest, ok := strings.Cut(p, "/")
		if !ok {
			return "", "", "", fmt.Errorf("no blob name in %q", raw)
		}
		root += "/" + c
		p = rest
	}
	if u.Scheme == "file" {
		root = "file:///"
	}
	if p == "" || strings.HasSuffix(p, "/") {
		return "", "", "", fmt.Errorf("no object name in %q", raw)
	}
	if err := storage.ValidateKey(p); err != nil {
		return "", "", "", err
	}
	return root, p, u.Scheme + "://" + u.Host, nil
}

func (f *Fetcher) bucket(ctx context.Context, root, host string) (storage.Bucket, chan struct{}, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, nil, storage.ErrClosed
	}
	hs, ok := f.hosts[host]
	if !ok {
		hs = make(chan struct{}, f.opts.PerHost)
		f.hosts[host] = hs
	}
	if b, ok := f.buckets[root]; ok {
		return b, hs, nil
	}
	b, err := f.opts.Registry.Open(ctx, root)
	if err != nil {
		return nil, nil, err
	}
	f.buckets[root] = b
	return b, hs, nil
}

// Fetch returns the bytes of the object rawURL names (transformed, if the
// Fetcher has a Transform). Failures are *Error values.
func (f *Fetcher) Fetch(ctx context.Context, rawURL string) ([]byte, error) {
	root, key, host, err := split(rawURL)
	if err != nil {
		return nil, &Error{URL: rawURL, Reason: "bad_url", Err: err}
	}
	b, hostSem, err := f.bucket(ctx, root, host)
	if err != nil {
		return nil, &Error{URL: rawURL, Reason: "bad_url", Err: err}
	}
	var last error
	for attempt := 1; ; attempt++ {
		data, err := f.once(ctx, b, hostSem, key)
		if err == nil {
			if f.opts.Transform != nil {
				out, terr := f.opts.Transform(data)
				if terr != nil {
					return nil, &Error{URL: rawURL, Reason: "decode", Attempts: attempt, Err: terr}
				}
				data = out
			}
			f.statMu.Lock()
			f.fetched++
			f.bytesIn += int64(len(data))
			f.statMu.Unlock()
			return data, nil
		}
		last = err
		if ctx.Err() != nil {
			return nil, &Error{URL: rawURL, Reason: "canceled", Attempts: attempt, Err: ctx.Err()}
		}
		retryable := storage.IsRetryable(err) || errors.Is(err, context.DeadlineExceeded)
		if !retryable || attempt >= f.opts.Attempts || errors.Is(err, errTooLarge) {
			return nil, &Error{URL: rawURL, Reason: Reason(err), Attempts: attempt, Err: last}
		}
		f.statMu.Lock()
		f.retries++
		f.statMu.Unlock()
		if err := sleep(ctx, f.delay(attempt, err)); err != nil {
			return nil, &Error{URL: rawURL, Reason: "canceled", Attempts: attempt, Err: err}
		}
	}
}

var errTooLarge = errors.New("object larger than the size cap")

func (f *Fetcher) once(ctx context.Context, b storage.Bucket, hostSem chan struct{}, key string) ([]byte, error) {
	select {
	case f.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-f.sem }()
	select {
	case hostSem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-hostSem }()
	actx, cancel := context.WithTimeout(ctx, f.opts.Timeout)
	defer cancel()
	data, err := storage.ReadAll(actx, b, key, f.opts.MaxBytes)
	if err != nil {
		if ctx.Err() == nil && actx.Err() != nil {
			return nil, fmt.Errorf("attempt timed out after %v: %w", f.opts.Timeout, context.DeadlineExceeded)
		}
		if !storage.IsRetryable(err) && strings.Contains(err.Error(), "larger than") {
			return nil, fmt.Errorf("%w: %w", errTooLarge, err)
		}
		return nil, err
	}
	return data, nil
}

func (f *Fetcher) delay(attempt int, err error) time.Duration {
	d := f.opts.BaseDelay << (attempt - 1)
	if d > f.opts.MaxDelay || d <= 0 {
		d = f.opts.MaxDelay
	}
	d = time.Duration(rand.Int64N(int64(d)) + 1) // full jitter
	if ra := storage.RetryAfter(err); ra > d {
		d = min(ra, f.opts.MaxDelay)
	}
	return d
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

// Reason classifies a fetch error for counting.
func Reason(err error) string {
	var fe *Error
	if errors.As(err, &fe) {
		return fe.Reason
	}
	switch {
	case errors.Is(err, errTooLarge):
		return "too_large"
	case errors.Is(err, storage.ErrNotExist):
		return "not_found"
	case errors.Is(err, storage.ErrPermission):
		return "forbidden"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	if code := storage.HTTPStatus(err); code != 0 {
		return fmt.Sprintf("http_%d", code)
	}
	return "network"
}

// Close releases the stores the Fetcher opened. Fetch fails afterwards.
func (f *Fetcher) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	var errs []error
	for _, b := range f.buckets {
		errs = append(errs, b.Close())
	}
	f.buckets = nil
	return errors.Join(errs...)
}
