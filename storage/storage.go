// Package storage defines Bucket, the small interface every object store
// driver implements, the errors callers branch on, and a Registry that maps
// URL schemes to drivers.
//
// Drivers live in their own packages (filestore, memstore, s3store, gcsstore,
// azstore, httpstore); cross-cutting behaviour such as retries and request
// limits is added by decorators that wrap a Bucket and return a Bucket.
// Every implementation passes the conformance suite in storagetest.
//
// # Keys
//
// Keys are slash-separated, relative to the root the Bucket was opened at
// (the bucket and prefix of its URL). They never start with "/", never
// contain "." or ".." elements and are valid UTF-8.
//
// # Errors
//
// A missing object yields an error matching ErrNotExist; refused access
// matches ErrPermission. Drivers wrap both the sentinel and the native cause,
// so errors.Is works for the sentinel and errors.As reaches the SDK's type.
package storage

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"time"
)

// Sentinel errors. Drivers return errors that match these with errors.Is.
var (
	// ErrNotExist reports a missing object. It is fs.ErrNotExist, so local
	// file errors match it too.
	ErrNotExist = fs.ErrNotExist
	// ErrPermission reports refused access (HTTP 401/403, EACCES).
	ErrPermission = fs.ErrPermission
	// ErrPrecondition reports a failed conditional request or a range that
	// starts past the end of the object.
	ErrPrecondition = errors.New("storage: precondition failed")
	// ErrClosed reports use of a Bucket after Close.
	ErrClosed = errors.New("storage: bucket closed")
	// ErrReadOnly reports a write to a store that cannot be written (HTTP).
	ErrReadOnly = errors.New("storage: read-only store")
)

// ObjectInfo describes one stored object.
type ObjectInfo struct {
	// Key is the object's key relative to the Bucket's root.
	Key string
	// Size is the object's length in bytes.
	Size int64
	// ModTime is the last modification time, zero when the store does not
	// report one.
	ModTime time.Time
	// ETag is an opaque version tag, empty when the store has none.
	ETag string
}

// WriteOptions tunes NewWriter. A nil *WriteOptions means the defaults.
type WriteOptions struct {
	// ContentType is stored with the object where the store supports it;
	// empty means application/octet-stream.
	ContentType string
	// PartSize is the size of each part of a multipart upload; zero lets the
	// driver choose.
	PartSize int64
	// Concurrency bounds the parts uploaded at once; zero lets the driver
	// choose.
	Concurrency int
}

// Bucket is a flat namespace of immutable objects under one root.
//
// Implementations must be safe for concurrent use by multiple goroutines.
// Every method that takes a context stops early, with ctx.Err() wrapped in
// its error, when the context is cancelled.
type Bucket interface {
	// Stat returns the object's metadata, or an error matching ErrNotExist.
	Stat(ctx context.Context, key string) (ObjectInfo, error)

	// NewRangeReader returns a reader for length bytes of the object
	// starting at offset off. A negative length reads to the end of the
	// object. A missing object yields ErrNotExist; off greater than the
	// object's size yields ErrPrecondition. If the object ends before
	// off+length, the reader returns the bytes that exist and then io.EOF
	// (callers that need exact lengths check them). The caller must Close
	// the reader.
	NewRangeReader(ctx context.Context, key string, off, length int64) (io.ReadCloser, error)

	// NewWriter returns a writer for a new object under key, replacing any
	// existing one. The object becomes visible only when Close returns nil;
	// a write that fails, or whose ctx is cancelled before Close, leaves the
	// previous state untouched. opts may be nil.
	NewWriter(ctx context.Context, key string, opts *WriteOptions) (io.WriteCloser, error)

	// List calls fn once for each object whose key starts with prefix, in
	// lexical key order, on the calling goroutine. It stops at and returns
	// the first error fn returns. Pagination is handled inside.
	List(ctx context.Context, prefix string, fn func(ObjectInfo) error) error

	// Delete removes the object; a missing object yields ErrNotExist.
	Delete(ctx context.Context, key string) error

	// URL returns a URL naming key in this store, for messages and logs
	// (for example "s3://bucket/prefix/key"). It performs no I/O.
	URL(key string) string

	// Close releases the Bucket's resources. Calls after Close fail with
	// ErrClosed.
	Close() error
}
