// Package stores builds the storage.Registry with every driver Sluice ships.
// It is the one place where URL schemes are wired to driver packages, and
// every driver is registered through the standard decorator stack
// (storage/stack: a limit of requests in flight under retries), so a
// Bucket opened through Default's Registry is always decorated: there is
// no way to reach a driver undecorated from it.
package stores

import (
	"context"

	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/azstore"
	"github.com/sluicedata/sluice/storage/filestore"
	"github.com/sluicedata/sluice/storage/gcsstore"
	"github.com/sluicedata/sluice/storage/httpstore"
	"github.com/sluicedata/sluice/storage/retry"
	"github.com/sluicedata/sluice/storage/s3store"
	"github.com/sluicedata/sluice/storage/stack"
)

// Default returns a Registry with every built-in driver registered, each
// opened through the decorator stack (see storage/stack; the Options a
// context carries from stack.WithOptions tune it).
func Default() *storage.Registry {
	r := &storage.Registry{}
	reg := func(scheme string, o storage.Opener) { r.Register(scheme, stack.Opener(o)) }
	// Local directories: plain paths and file:// URLs.
	reg("file", filestore.Open)
	// Read-only HTTP(S).
	reg("http", httpstore.Open)
	reg("https", httpstore.Open)
	// Cloud object stores.
	reg("s3", s3store.Open)
	reg("gs", gcsstore.Open)
	reg("az", azstore.Open)
	reg("azure", azstore.Open)
	return r
}

// Options tunes Open. A nil *Options means the defaults.
type Options struct {
	// MaxInFlight bounds the requests in flight to the store. Zero means
	// 64; negative means no limit.
	MaxInFlight int
	// Retry is the retry policy; nil means retry's defaults.
	Retry *retry.Options
}

// Open opens rawURL through r with the standard decorators tuned by opts:
// a limit of requests in flight, and retries around it (so a request
// waiting out its backoff holds no slot). A Registry whose openers do not
// decorate (one a test builds) gets the decorators here. opts may be nil.
func Open(ctx context.Context, r *storage.Registry, rawURL string, opts *Options) (storage.Bucket, error) {
	so := &stack.Options{}
	if opts != nil {
		so.MaxInFlight, so.Retry = opts.MaxInFlight, opts.Retry
	}
	b, err := r.Open(stack.WithOptions(ctx, so), rawURL)
	if err != nil {
		return nil, err
	}
	return stack.Wrap(b, so)
}
