// Package stores builds the storage.Registry with every driver Sluice ships.
// It is the one place where URL schemes are wired to driver packages, and
// where the standard decorator stack (request limit, then retries) is put
// around a freshly opened Bucket.
package stores

import (
	"context"
	"fmt"

	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/azstore"
	"github.com/sluicedata/sluice/storage/filestore"
	"github.com/sluicedata/sluice/storage/gcsstore"
	"github.com/sluicedata/sluice/storage/httpstore"
	"github.com/sluicedata/sluice/storage/limit"
	"github.com/sluicedata/sluice/storage/retry"
	"github.com/sluicedata/sluice/storage/s3store"
)

// Default returns a Registry with every built-in driver registered.
func Default() *storage.Registry {
	r := &storage.Registry{}
	// Local directories: plain paths and file:// URLs.
	r.Register("file", filestore.Open)
	// Read-only HTTP(S).
	r.Register("http", httpstore.Open)
	r.Register("https", httpstore.Open)
	// Cloud object stores (s3, gs, az, azure) are registered below.
	r.Register("s3", s3store.Open)
	r.Register("gs", gcsstore.Open)
	r.Register("az", azstore.Open)
	r.Register("azure", azstore.Open)
	return r
}

// Options tunes Open. A nil *Options means the defaults.
type Options struct {
	// MaxInFlight bounds the requests in flight to the store. Zero means
	// 64; negative means no limit.
	MaxInFlight int
	// Retry is the retry policy; nil means retry's defaults.
	Retry *retry.Options
	// NoRetry opens the Bucket without the retry decorator.
	NoRetry bool
}

// Open opens rawURL through r and wraps the Bucket in the standard
// decorators: a limit of requests in flight, and retries around it (so a
// request waiting out its backoff holds no slot). opts may be nil.
func Open(ctx context.Context, r *storage.Registry, rawURL string, opts *Options) (storage.Bucket, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.MaxInFlight == 0 {
		o.MaxInFlight = 64
	}
	b, err := r.Open(ctx, rawURL)
	if err != nil {
		return nil, err
	}
	if o.MaxInFlight > 0 {
		lb, err := limit.New(b, o.MaxInFlight)
		if err != nil {
			b.Close()
			return nil, fmt.Errorf("open %s: %w", rawURL, err)
		}
		b = lb
	}
	if !o.NoRetry {
		rb, err := retry.New(b, o.Retry)
		if err != nil {
			b.Close()
			return nil, fmt.Errorf("open %s: %w", rawURL, err)
		}
		b = rb
	}
	return b, nil
}
