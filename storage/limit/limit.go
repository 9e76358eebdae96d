// Package limit is a storage.Bucket decorator that bounds the number of
// requests in flight to one store.
//
// Stat, Delete and each attempt to open a reader or writer take a slot; a
// reader or writer keeps its slot until it is closed, because its request
// is in flight until then. List does not take a slot: it is one sequential
// stream of requests, and callers commonly start other operations from its
// callback, which must not wait for a slot List holds. An Upload takes one
// slot for its whole duration, whatever parallelism the driver uses inside.
//
// Stack it under the retry decorator (retry.New(limit.New(b, n))) so that a
// request waiting out its backoff holds no slot.
package limit

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/sluicedata/sluice/storage"
)

// Bucket bounds the requests in flight to the Bucket it wraps. It is safe
// for concurrent use.
type Bucket struct {
	inner storage.Bucket
	sem   chan struct{}
}

var (
	_ storage.Bucket   = (*Bucket)(nil)
	_ storage.Uploader = (*Bucket)(nil)
)

// New returns b limited to n requests in flight; n must be positive.
func New(b storage.Bucket, n int) (*Bucket, error) {
	if n <= 0 {
		return nil, fmt.Errorf("limit: requests in flight must be positive, got %d", n)
	}
	return &Bucket{inner: b, sem: make(chan struct{}, n)}, nil
}

// Unwrap returns the wrapped Bucket.
func (b *Bucket) Unwrap() storage.Bucket { return b.inner }

// InFlight returns the number of slots in use.
func (b *Bucket) InFlight() int { return len(b.sem) }

// acquire takes a slot or fails when ctx ends first.
func (b *Bucket) acquire(ctx context.Context, op, key string) error {
	select {
	case b.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("limit: %s %s: waiting for a request slot: %w", op, b.inner.URL(key), ctx.Err())
	}
}

func (b *Bucket) release() { <-b.sem }

// URL implements storage.Bucket.
func (b *Bucket) URL(key string) string { return b.inner.URL(key) }

// Close implements storage.Bucket.
func (b *Bucket) Close() error { return b.inner.Close() }

// Stat implements storage.Bucket.
func (b *Bucket) Stat(ctx context.Context, key string) (storage.ObjectInfo, error) {
	if err := b.acquire(ctx, "stat", key); err != nil {
		return storage.ObjectInfo{}, err
	}
	defer b.release()
	return b.inner.Stat(ctx, key)
}

// Delete implements storage.Bucket.
func (b *Bucket) Delete(ctx context.Context, key string) error {
	if err := b.acquire(ctx, "delete", key); err != nil {
		return err
	}
	defer b.release()
	return b.inner.Delete(ctx, key)
}

// List implements storage.Bucket without taking a slot (see the package
// documentation).
func (b *Bucket) List(ctx context.Context, prefix string, fn func(storage.ObjectInfo) error) error {
	return b.inner.List(ctx, prefix, fn)
}

// Upload implements storage.Uploader, holding one slot throughout.
func (b *Bucket) Upload(ctx context.Context, key string, src io.ReaderAt, size int64, opts *storage.WriteOptions) error {
	if err := b.acquire(ctx, "upload", key); err != nil {
		return err
	}
	defer b.release()
	return storage.Upload(ctx, b.inner, key, src, size, opts)
}

// NewRangeReader implements storage.Bucket; the reader holds a slot until
// it is closed.
func (b *Bucket) NewRangeReader(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	if err := b.acquire(ctx, "get", key); err != nil {
		return nil, err
	}
	r, err := b.inner.NewRangeReader(ctx, key, off, length)
	if err != nil {
		b.release()
		return nil, err
	}
	return &reader{ReadCloser: r, release: sync.OnceFunc(b.release)}, nil
}

type reader struct {
	io.ReadCloser
	release func()
}

// ObjectInfo implements storage.InfoReader for the reader it wraps.
func (r *reader) ObjectInfo() (storage.ObjectInfo, bool) { return storage.ReaderInfo(r.ReadCloser) }

// ContinueCheck implements storage.ResumableCheck for the reader it wraps.
func (r *reader) ContinueCheck(rest io.Reader) io.Reader {
	return storage.ContinueCheck(r.ReadCloser, rest)
}

func (r *reader) Close() error {
	defer r.release()
	return r.ReadCloser.Close()
}

// NewWriter implements storage.Bucket; the writer holds a slot until it is
// closed.
func (b *Bucket) NewWriter(ctx context.Context, key string, opts *storage.WriteOptions) (io.WriteCloser, error) {
	if err := b.acquire(ctx, "put", key); err != nil {
		return nil, err
	}
	w, err := b.inner.NewWriter(ctx, key, opts)
	if err != nil {
		b.release()
		return nil, err
	}
	return &writer{WriteCloser: w, release: sync.OnceFunc(b.release)}, nil
}

type writer struct {
	io.WriteCloser
	release func()
}

func (w *writer) Close() error {
	defer w.release()
	return w.WriteCloser.Close()
}
