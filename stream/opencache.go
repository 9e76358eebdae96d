package stream

import (
	"context"
	"fmt"

	"github.com/sluicedata/sluice/cache"
)

// cacheBehind is the cache an Open opens for itself while it requests
// its first stream's index: creating the cache's directories and files
// (five inodes on a new cache, ~0.4 ms) no longer delays that request and
// so the time to first sample. Nothing before the stream's registration
// needs the cache itself: its root and limit are known from the options.
type cacheBehind struct {
	done chan struct{} // closed once cache.Open returned
	dir  string        // the cache's absolute root
	c    *cache.Cache  // set before done is closed, on success
	err  error         // set before done is closed, on failure
}

// openCacheBehind starts opening the cache at dir (absolute) with opts;
// awaitCache makes it the dataset's.
func (d *Dataset) openCacheBehind(ctx context.Context, dir string, opts *cache.Options) {
	b := &cacheBehind{done: make(chan struct{}), dir: dir}
	d.behind = b
	go func() {
		defer close(b.done)
		b.c, b.err = cache.Open(ctx, dir, opts)
	}()
}

// awaitCache waits for the cache openCacheBehind opens, if any, and makes
// it the dataset's own. The wait is bounded: cache.Open gives up with its
// context or after its lock timeout.
func (d *Dataset) awaitCache() error {
	b := d.behind
	if b == nil {
		return nil
	}
	<-b.done
	d.behind = nil
	if b.err != nil {
		return fmt.Errorf("stream: %w", b.err)
	}
	d.cache, d.ownCache = b.c, true
	return nil
}

// guard returns ctx, cancelled (with the cache's error as its cause) if
// the cache fails to open before stop is called: a request made while the
// cache opens does not outlive the Open's failure (its retries would).
func (b *cacheBehind) guard(ctx context.Context) (_ context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	stopped := make(chan struct{})
	go func() {
		select {
		case <-b.done:
			if b.err != nil {
				cancel(b.err)
			}
		case <-stopped:
		}
	}()
	return ctx, func() {
		close(stopped)
		cancel(nil)
	}
}

// cacheRoot returns the cache's absolute root, known before the cache
// is open.
func (d *Dataset) cacheRoot() string {
	if d.behind != nil {
		return d.behind.dir
	}
	return d.cache.Dir()
}

// cacheLimit returns the cache's limit (zero: none), known before the
// cache is open.
func (d *Dataset) cacheLimit() int64 {
	if d.behind != nil {
		return d.opts.CacheLimit
	}
	return d.cache.Limit()
}
