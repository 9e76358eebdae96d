// Package memstore is an in-memory storage.Bucket: the reference
// implementation of the storage contract, for tests, examples and
// benchmarks.
//
// # URLs
//
// mem://name opens an empty bucket; every Open returns a new one, so the
// scheme is useful only within one process (tests, the quickstart).
package memstore

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluicedata/sluice/storage"
)

// object is one stored object; data is never modified after it is stored,
// so readers share it without copying.
type object struct {
	data    []byte
	modTime time.Time
	etag    string
}

// Bucket is an in-memory storage.Bucket. The zero value is not usable; call
// New. It is safe for concurrent use.
type Bucket struct {
	name string

	// mu guards objects and closed.
	mu      sync.RWMutex
	objects map[string]*object
	closed  bool
}

var (
	_ storage.Bucket = (*Bucket)(nil)
)

// New returns an empty Bucket; name appears in URLs ("mem://name/key").
func New(name string) *Bucket {
	return &Bucket{name: name, objects: make(map[string]*object)}
}

// Open is a storage.Opener for "mem://name" URLs.
func Open(_ context.Context, u *url.URL) (storage.Bucket, error) {
	return New(u.Host + strings.TrimSuffix(u.Path, "/")), nil
}

// URL implements storage.Bucket.
func (b *Bucket) URL(key string) string { return "mem://" + b.name + "/" + key }

func (b *Bucket) get(op, key string) (*object, error) {
	if err := storage.ValidateKey(key); err != nil {
		return nil, fmt.Errorf("memstore: %s: %w", op, err)
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return nil, fmt.Errorf("memstore: %s %s: %w", op, b.URL(key), storage.ErrClosed)
	}
	o, ok := b.objects[key]
	if !ok {
		return nil, fmt.Errorf("memstore: %s %s: %w", op, b.URL(key), storage.ErrNotExist)
	}
	return o, nil
}

// Stat implements storage.Bucket.
func (b *Bucket) Stat(ctx context.Context, key string) (storage.ObjectInfo, error) {
	if err := ctx.Err(); err != nil {
		return storage.ObjectInfo{}, fmt.Errorf("memstore: stat %s: %w", b.URL(key), err)
	}
	o, err := b.get("stat", key)
	if err != nil {
		return storage.ObjectInfo{}, err
	}
	return storage.ObjectInfo{Key: key, Size: int64(len(o.data)), ModTime: o.modTime, ETag: o.etag}, nil
}

// NewRangeReader implements storage.Bucket.
func (b *Bucket) NewRangeReader(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memstore: get %s: %w", b.URL(key), err)
	}
	if off < 0 {
		return nil, storage.Permanent(fmt.Errorf("memstore: get %s: negative offset %d", b.URL(key), off))
	}
	o, err := b.get("get", key)
	if err != nil {
		return nil, err
	}
	size := int64(len(o.data))
	if off > size {
		return nil, fmt.Errorf("memstore: get %s: offset %d beyond size %d: %w", b.URL(key), off, size, storage.ErrPrecondition)
	}
	end := size
	if length >= 0 && off+length < size {
		end = off + length
	}
	return &reader{ctx: ctx, r: bytes.NewReader(o.data[off:end])}, nil
}

// reader reads a stored object; it stops when its context is cancelled.
type reader struct {
	ctx context.Context
	r   *bytes.Reader
}

func (r *reader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}

func (r *reader) Close() error { return nil }

// NewWriter implements storage.Bucket. The object is buffered in memory and
// stored by Close.
func (b *Bucket) NewWriter(ctx context.Context, key string, _ *storage.WriteOptions) (io.WriteCloser, error) {
	if err := storage.ValidateKey(key); err != nil {
		return nil, fmt.Errorf("memstore: put: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memstore: put %s: %w", b.URL(key), err)
	}
	b.mu.RLock()
	closed := b.closed
	b.mu.RUnlock()
	if closed {
		return nil, fmt.Errorf("memstore: put %s: %w", b.URL(key), storage.ErrClosed)
	}
	return &writer{ctx: ctx, b: b, key: key}, nil
}

type writer struct {
	ctx    context.Context
	b      *Bucket
	key    string
	buf    bytes.Buffer
	err    error // sticky
	closed bool
}

func (w *writer) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	if w.closed {
		return 0, fmt.Errorf("memstore: put %s: write after close", w.b.URL(w.key))
	}
	if err := w.ctx.Err(); err != nil {
		w.err = fmt.Errorf("memstore: put %s: %w", w.b.URL(w.key), err)
		return 0, w.err
	}
	return w.buf.Write(p)
}

func (w *writer) Close() error {
	if w.closed {
		return fmt.Errorf("memstore: put %s: already closed", w.b.URL(w.key))
	}
	w.closed = true
	if w.err != nil {
		return w.err
	}
	if err := w.ctx.Err(); err != nil {
		return fmt.Errorf("memstore: put %s: %w", w.b.URL(w.key), err)
	}
	// The writer is done with its buffer: the object takes it over.
	data := w.buf.Bytes()
	w.buf = bytes.Buffer{}
	sum := md5.Sum(data)
	o := &object{data: data, modTime: time.Now(), etag: hex.EncodeToString(sum[:])}
	w.b.mu.Lock()
	defer w.b.mu.Unlock()
	if w.b.closed {
		return fmt.Errorf("memstore: put %s: %w", w.b.URL(w.key), storage.ErrClosed)
	}
	w.b.objects[w.key] = o
	return nil
}

// List implements storage.Bucket. It lists a snapshot taken when it starts.
func (b *Bucket) List(ctx context.Context, prefix string, fn func(storage.ObjectInfo) error) error {
	b.mu.RLock()
	if b.closed {
		b.mu.RUnlock()
		return fmt.Errorf("memstore: list %s: %w", b.URL(prefix), storage.ErrClosed)
	}
	infos := make([]storage.ObjectInfo, 0, len(b.objects))
	for k, o := range b.objects {
		if strings.HasPrefix(k, prefix) {
			infos = append(infos, storage.ObjectInfo{Key: k, Size: int64(len(o.data)), ModTime: o.modTime, ETag: o.etag})
		}
	}
	b.mu.RUnlock()
	slices.SortFunc(infos, func(a, b storage.ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	for _, info := range infos {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("memstore: list %s: %w", b.URL(prefix), err)
		}
		if err := fn(info); err != nil {
			return err
		}
	}
	return nil
}

// Delete implements storage.Bucket.
func (b *Bucket) Delete(ctx context.Context, key string) error {
	if err := storage.ValidateKey(key); err != nil {
		return fmt.Errorf("memstore: delete: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: delete %s: %w", b.URL(key), err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return fmt.Errorf("memstore: delete %s: %w", b.URL(key), storage.ErrClosed)
	}
	if _, ok := b.objects[key]; !ok {
		return fmt.Errorf("memstore: delete %s: %w", b.URL(key), storage.ErrNotExist)
	}
	delete(b.objects, key)
	return nil
}

// Close implements storage.Bucket; it drops every object.
func (b *Bucket) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return fmt.Errorf("memstore: close %s: %w", b.URL(""), storage.ErrClosed)
	}
	b.closed = true
	b.objects = nil
	return nil
}
