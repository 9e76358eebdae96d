// Package fetch downloads the objects that URL columns reference, for
// embedding into shards: a bounded pool of concurrent requests, per-host
// limits, retries with capped exponential backoff and jitter that honour
// Retry-After (only for transient failures: 5xx, 408, 429, timeouts,
// network errors; other 4xx are permanent), a size cap, an optional
// transform (image re-encoding) and an optional check of the bytes
// against the column's encoding.
//
// URLs come from untrusted data, so a Policy decides what may be fetched:
// by default http and https to public addresses only, checked on every
// dialled address (see Policy). http(s) goes through the Fetcher's own
// client; s3, gs and az, when the policy names them, through the storage
// registry; local files only under the policy's file root.
//
// Failures are returned as *Error values whose Reason classifies them
// ("not_found", "http_500", "timeout", "blocked_address", ...) so a caller
// can count them.
package fetch

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
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
	// ImageTransform); its failures have reason CheckReason.
	Transform func([]byte) ([]byte, error)
	// Check, if set, is applied to the final bytes of every object (for
	// example CheckEncoding("jpeg")); its failures have reason CheckReason.
	Check func([]byte) error
	// CheckReason is the reason of Transform and Check failures; "" means
	// "invalid".
	CheckReason string
	// Policy says which URLs may be fetched; the zero value allows http
	// and https to public addresses.
	Policy Policy
	// UserAgent, if set, is sent with http(s) requests.
	UserAgent string
}

// Error is a failed fetch.
type Error struct {
	// URL is the object that failed.
	URL string
	// Reason classifies the failure: not_found, forbidden, http_<code>,
	// timeout, too_large, bad_url, scheme_not_allowed, blocked_address,
	// redirect_refused, outside_root, network, canceled, or the
	// Options.CheckReason of a failed check.
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

	client *http.Client
	root   *os.Root // the policy's file root, nil without one

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
	if o.CheckReason == "" {
		o.CheckReason = "invalid"
	}
	if err := o.Policy.Validate(); err != nil {
		return nil, err
	}
	f := &Fetcher{
		opts:    o,
		sem:     make(chan struct{}, o.Concurrency),
		buckets: map[string]storage.Bucket{},
		hosts:   map[string]chan struct{}{},
		client:  newHTTPClient(&o),
	}
	if o.Policy.FileRoot != "" {
		root, err := os.OpenRoot(o.Policy.FileRoot)
		if err != nil {
			return nil, fmt.Errorf("fetch: file root: %w", err)
		}
		f.root = root
	}
	return f, nil
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
func split(u *url.URL, raw string) (root, key, host string, err error) {
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
	get, hostSem, err := f.target(ctx, rawURL)
	if err != nil {
		reason := "bad_url"
		switch {
		case errors.Is(err, ErrSchemeNotAllowed):
			reason = "scheme_not_allowed"
		case errors.Is(err, ErrBlockedAddress):
			reason = "blocked_address"
		case errors.Is(err, ErrOutsideRoot):
			reason = "outside_root"
		}
		return nil, &Error{URL: redact(rawURL), Reason: reason, Err: err}
	}
	var last error
	for attempt := 1; ; attempt++ {
		data, err := f.once(ctx, hostSem, get)
		if err == nil {
			if f.opts.Transform != nil {
				out, terr := f.opts.Transform(data)
				if terr != nil {
					return nil, &Error{URL: redact(rawURL), Reason: f.opts.CheckReason, Attempts: attempt, Err: terr}
				}
				data = out
			}
			if f.opts.Check != nil {
				if cerr := f.opts.Check(data); cerr != nil {
					return nil, &Error{URL: redact(rawURL), Reason: f.opts.CheckReason, Attempts: attempt, Err: cerr}
				}
			}
			f.statMu.Lock()
			f.fetched++
			f.bytesIn += int64(len(data))
			f.statMu.Unlock()
			return data, nil
		}
		last = err
		if ctx.Err() != nil {
			return nil, &Error{URL: redact(rawURL), Reason: "canceled", Attempts: attempt, Err: ctx.Err()}
		}
		if !retryable(err) || attempt >= f.opts.Attempts {
			return nil, &Error{URL: redact(rawURL), Reason: Reason(err), Attempts: attempt, Err: last}
		}
		f.statMu.Lock()
		f.retries++
		f.statMu.Unlock()
		if err := sleep(ctx, f.delay(attempt, err)); err != nil {
			return nil, &Error{URL: redact(rawURL), Reason: "canceled", Attempts: attempt, Err: err}
		}
	}
}

// retryable reports whether a failed attempt may succeed when repeated:
// timeouts, network errors, 5xx, 408 and 429. Policy refusals, missing
// objects, other 4xx and oversized objects are permanent.
func retryable(err error) bool {
	switch {
	case errors.Is(err, errTooLarge), errors.Is(err, ErrBlockedAddress), errors.Is(err, ErrRedirect),
		errors.Is(err, ErrOutsideRoot), errors.Is(err, storage.ErrNotExist):
		return false
	case errors.Is(err, context.DeadlineExceeded):
		return true
	}
	if code := storage.HTTPStatus(err); code != 0 {
		return code >= 500 || code == 408 || code == 429
	}
	return storage.IsRetryable(err)
}

// getter performs one attempt at reading an object.
type getter func(ctx context.Context) ([]byte, error)

// target checks rawURL against the policy and returns how to read it and
// the semaphore of its host.
func (f *Fetcher) target(ctx context.Context, rawURL string) (getter, chan struct{}, error) {
	if !strings.Contains(rawURL, "://") {
		if !strings.HasPrefix(rawURL, "/") {
			return nil, nil, fmt.Errorf("not a URL or absolute path: %q", rawURL)
		}
		rawURL = "file://" + rawURL // an absolute local path
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, nil, err
	}
	scheme := strings.ToLower(u.Scheme)
	if !f.opts.Policy.schemeAllowed(scheme) {
		hint := "--fetch-schemes " + scheme
		if scheme == "file" {
			hint = "--fetch-file-root DIR"
		}
		return nil, nil, fmt.Errorf("%w: %q (only http and https by default; allow it with %s)", ErrSchemeNotAllowed, scheme, hint)
	}
	switch scheme {
	case "http", "https":
		if u.Host == "" {
			return nil, nil, fmt.Errorf("no host in %q", redact(rawURL))
		}
		if err := f.opts.Policy.checkHost(u.Host); err != nil {
			return nil, nil, err
		}
		hs, err := f.hostSem(scheme + "://" + u.Host)
		if err != nil {
			return nil, nil, err
		}
		return func(ctx context.Context) ([]byte, error) { return f.httpGet(ctx, rawURL) }, hs, nil
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return nil, nil, fmt.Errorf("file URL with a host: %q", rawURL)
		}
		if _, err := f.opts.Policy.relToRoot(u.Path); err != nil {
			return nil, nil, err
		}
		hs, err := f.hostSem("file://")
		if err != nil {
			return nil, nil, err
		}
		p := u.Path
		return func(context.Context) ([]byte, error) { return f.readLocal(p) }, hs, nil
	}
	root, key, host, err := split(u, rawURL)
	if err != nil {
		return nil, nil, err
	}
	b, hs, err := f.bucket(ctx, root, host)
	if err != nil {
		return nil, nil, err
	}
	return func(ctx context.Context) ([]byte, error) {
		data, err := storage.ReadAll(ctx, b, key, f.opts.MaxBytes)
		if err != nil && !storage.IsRetryable(err) && strings.Contains(err.Error(), "larger than") {
			return nil, fmt.Errorf("%w: %w", errTooLarge, err)
		}
		return data, err
	}, hs, nil
}

func (f *Fetcher) hostSem(host string) (chan struct{}, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, storage.ErrClosed
	}
	hs, ok := f.hosts[host]
	if !ok {
		hs = make(chan struct{}, f.opts.PerHost)
		f.hosts[host] = hs
	}
	return hs, nil
}

var errTooLarge = errors.New("object larger than the size cap")

func (f *Fetcher) once(ctx context.Context, hostSem chan struct{}, get getter) ([]byte, error) {
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
	data, err := get(actx)
	if err != nil {
		if ctx.Err() == nil && actx.Err() != nil {
			return nil, fmt.Errorf("attempt timed out after %v: %w", f.opts.Timeout, context.DeadlineExceeded)
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
	case errors.Is(err, ErrBlockedAddress):
		return "blocked_address"
	case errors.Is(err, ErrRedirect):
		return "redirect_refused"
	case errors.Is(err, ErrOutsideRoot):
		return "outside_root"
	case errors.Is(err, ErrSchemeNotAllowed):
		return "scheme_not_allowed"
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
	f.client.CloseIdleConnections()
	if f.root != nil {
		errs = append(errs, f.root.Close())
		f.root = nil
	}
	for _, b := range f.buckets {
		errs = append(errs, b.Close())
	}
	f.buckets = nil
	return errors.Join(errs...)
}
