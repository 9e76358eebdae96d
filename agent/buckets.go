package agent

import (
	"context"
	"errors"
	"net/url"
	"sync"

	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/stack"
)

// bucketPool keeps every store the agent opened open until the agent shuts
// down, one per store URL, job settings (see jobenv.go) and decorator
// settings (storage/stack.Options.Key: retry policy, attempt timeout).
//
// The node cache registers a remote dataset directory once, with the store
// of the first stream.Dataset that opened it, and downloads later shards of
// that directory through that store for as long as the agent runs. Each
// stream.Dataset closes the stores it opened when it closes, so without the
// pool a dataset closed and opened again in one process (a training loop
// that breaks, drops its dataset and builds a new one on the same local)
// had its downloads fail with storage.ErrClosed. Through the pool a Close
// from a stream.Dataset is a no-op; the stores close in close, after every
// dataset and cache.
type bucketPool struct {
	base *storage.Registry
	// instrument wraps each store the pool opens (Options.Instrument);
	// nil leaves them as they are.
	instrument func(dataset string, b storage.Bucket) storage.Bucket

	mu      sync.Mutex
	buckets map[string]storage.Bucket
	closed  bool
}

// registry returns a Registry with the schemes of base whose openers go
// through the pool.
func (p *bucketPool) registry() *storage.Registry {
	r := &storage.Registry{}
	for _, s := range p.base.Schemes() {
		r.Register(s, p.open)
	}
	return r
}

// errPoolClosed reports an open after the agent began shutting down.
var errPoolClosed = errors.New("agent: store pool closed (the agent is shutting down)")

func (p *bucketPool) open(ctx context.Context, u *url.URL) (storage.Bucket, error) {
	env := envFrom(ctx)
	// The decorator settings a stream asks for (its download timeout as
	// the attempt timeout, the retry policy) are part of the key: a store
	// decorated for one dataset is never handed to another that asked for
	// other settings.
	key := u.String() + "\x00" + env.fingerprint() + "\x00" + stack.OptionsFrom(ctx).Key()
	if p.instrument != nil {
		// Each dataset's requests are timed under its own name, below
		// the decorators the openers add (stack.Options.Inner), so that
		// every attempt of a retried request counts.
		name := datasetFrom(ctx)
		key += "\x00" + name
		var so stack.Options
		if cur := stack.OptionsFrom(ctx); cur != nil {
			so = *cur
		}
		so.Inner = func(b storage.Bucket) storage.Bucket { return p.instrument(name, b) }
		ctx = stack.WithOptions(ctx, &so)
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errPoolClosed
	}
	if b, ok := p.buckets[key]; ok {
		p.mu.Unlock()
		return b, nil
	}
	p.mu.Unlock()
	var b storage.Bucket
	var err error
	if env != nil {
		b, err = p.openWithEnv(ctx, u, env)
	} else {
		b, err = p.openBase(ctx, u)
	}
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if prev, ok := p.buckets[key]; ok {
		b.Close()
		return prev, nil
	}
	if p.closed {
		b.Close()
		return nil, errPoolClosed
	}
	if p.buckets == nil {
		p.buckets = map[string]storage.Bucket{}
	}
	pb := pooledBucket{b}
	p.buckets[key] = pb
	return pb, nil
}

// close closes every pooled store.
// openBase opens u through the pool's base registry. Its openers put the
// pool's instrument under their decorators (ctx's stack.Options.Inner);
// a store opened undecorated (a Registry a test builds) is instrumented
// here, and the stream's decorators then go around it.
func (p *bucketPool) openBase(ctx context.Context, u *url.URL) (storage.Bucket, error) {
	b, err := p.base.Open(ctx, u.String())
	if err != nil {
		return nil, err
	}
	if p.instrument != nil && !stack.Wrapped(b) {
		b = p.instrument(datasetFrom(ctx), b)
	}
	return b, nil
}

func (p *bucketPool) close() error {
	p.mu.Lock()
	bs := p.buckets
	p.buckets, p.closed = nil, true
	p.mu.Unlock()
	var errs []error
	for _, b := range bs {
		errs = append(errs, b.(pooledBucket).Bucket.Close())
	}
	return errors.Join(errs...)
}

// pooledBucket is a pooled store as its users see it: Close leaves it open.
type pooledBucket struct{ storage.Bucket }

// Close does nothing: the pool closes the store when the agent shuts down.
func (pooledBucket) Close() error { return nil }

// Unwrap returns the pooled store (already decorated by the Registry), so
// stream does not stack a second retry decorator on it (storage/stack).
func (p pooledBucket) Unwrap() storage.Bucket { return p.Bucket }
