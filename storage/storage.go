// Package storage defines Bucket, the small interface every object store
// driver implements, the errors callers branch on, a Registry that maps URL
// schemes to drivers, and helpers that work on any Bucket: Download (an
// object to a local file, atomically, in parallel ranged parts), Upload,
// UploadFile and WriteFrom, ReadAll, Exists, Copy and CopyTree (a whole
// dataset between two stores, index files last), and Publisher (uploads
// the files a dataset writer finishes, for the MDS writer's OnFileDone).
//
// Drivers live in their own packages (filestore, memstore, s3store, gcsstore,
// azstore, httpstore); cross-cutting behaviour such as retries (package
// retry) and request limits (package limit) is added by decorators that wrap
// a Bucket and return a Bucket. Every implementation passes the conformance
// suite in storagetest.
//
// # Keys
//
// Keys are slash-separated, relative to the root the Bucket was opened at
// (the bucket and prefix of its URL). They are non-empty valid UTF-8, never
// start or end with "/", never contain empty, "." or ".." elements and
// never contain NUL. ValidateKey checks this; drivers call it and return an
// error matching ErrInvalidKey for keys that break it.
//
// # Errors
//
// A missing object yields an error matching ErrNotExist; refused access
// matches ErrPermission. Drivers wrap both the sentinel and the native cause,
// so errors.Is works for the sentinel and errors.As reaches the SDK's type.
//
// # Retryable and permanent errors
//
// Whether a failed operation is worth repeating is decided in one place,
// IsRetryable, which every decorator and helper uses. Drivers make their
// errors classifiable like this:
//
//   - An HTTP response with a non-success status becomes an *HTTPError
//     (StatusCode, the store's Code, RetryAfter parsed from the Retry-After
//     header or equivalent, and the SDK error in Err). HTTPError matches
//     ErrNotExist (404, 410), ErrPermission (401, 403) and ErrPrecondition
//     (412, 416) by itself. Any other error type with a method
//     HTTPStatusCode() int (the AWS SDK's response errors have one) is
//     classified the same way; HTTPStatus extracts the code, and a method
//     RetryAfterDelay() time.Duration supplies the delay RetryAfter returns.
//   - Never retried: ErrNotExist, ErrPermission, ErrPrecondition, ErrClosed,
//     ErrReadOnly, ErrInvalidKey, errors.ErrUnsupported, errors wrapped with
//     Permanent, HTTP 4xx other than 408 and 429, HTTP 501 and 505, and
//     context.Canceled or context.DeadlineExceeded (the caller gave up).
//   - Retried: HTTP 408, 429, 5xx; errors wrapped with Temporary or with a
//     Temporary() bool method that reports true; timeouts (Timeout() bool);
//     connection resets, refusals, broken pipes, io.ErrUnexpectedEOF (a
//     truncated body) and other network errors.
//   - Local system errors (syscall.Errno) other than those are permanent.
//   - Anything else is retried: an unknown failure most likely came from a
//     transport an SDK did not classify, and the retry budget bounds the
//     cost.
//
// IsThrottled tells throttling (429, 503 SlowDown/ServerBusy) apart, so a
// policy can back off further. Drivers should disable their SDK's own retry
// loops, or document where they cannot, so that retries and their budget
// live in the retry decorator only.
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
	// ErrInvalidKey reports a key that breaks the rules in the package
	// documentation (see ValidateKey).
	ErrInvalidKey = errors.New("storage: invalid key")
	// ErrChecksum reports a body that does not match the checksum the
	// store sent with it (damage in transit). It surfaces when the body
	// ends, after its bytes were read, so a reader cannot resume past it:
	// the retry decorator fails the read, and the caller reads the object
	// again from its start (the cache's download attempts do).
	ErrChecksum = errors.New("storage: body does not match the store's checksum")
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
	// Checksum is the store's checksum of the whole object, where Stat
	// gets one without a further request (S3 asked for it, GCS's CRC32C),
	// and the zero Checksum otherwise. It is not set by List.
	Checksum Checksum
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
	// object; a zero length yields an empty reader (after the same checks).
	// A negative off is an error. A missing object yields ErrNotExist; off
	// greater than the object's size yields ErrPrecondition, while off equal
	// to the size yields an empty reader. If the object ends before
	// off+length, the reader returns the bytes that exist and then io.EOF
	// (callers that need exact lengths check them). Reads stop with an error
	// soon after ctx is cancelled, even while blocked waiting for data (the
	// retry decorator relies on this to abort stalled bodies). The caller
	// must Close the reader.
	NewRangeReader(ctx context.Context, key string, off, length int64) (io.ReadCloser, error)

	// NewWriter returns a writer for a new object under key, replacing any
	// existing one. The object becomes visible only when Close returns nil;
	// a write that fails, or whose ctx is cancelled before Close, leaves the
	// previous state untouched. To abandon a write, cancel ctx and then call
	// Close, which then returns an error (wrapping ctx.Err()) and releases
	// everything the write held. opts may be nil.
	NewWriter(ctx context.Context, key string, opts *WriteOptions) (io.WriteCloser, error)

	// List calls fn once for each object whose key starts with prefix, in
	// lexical (byte-wise) key order, on the calling goroutine. It stops at
	// and returns the first error fn returns, unwrapped. Pagination is
	// handled inside. The empty prefix lists everything; a prefix is a plain
	// string prefix, not necessarily a whole path element. A store that
	// cannot list (plain HTTP) returns an error matching
	// errors.ErrUnsupported.
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

// Uploader is an optional capability of a Bucket: writing an object from a
// source that can be read again from any offset, which lets a driver upload
// parts in parallel and lets the retry decorator repeat a failed upload.
// Use it through the Upload helper, which falls back to NewWriter.
type Uploader interface {
	// Upload stores size bytes read from src (starting at offset 0) as the
	// object key, replacing any existing one, with the visibility rules of
	// NewWriter. It may read src concurrently and more than once. opts may
	// be nil.
	Upload(ctx context.Context, key string, src io.ReaderAt, size int64, opts *WriteOptions) error
}

// ResponseHeaderTimeout is the HTTP drivers' own bound on the wait for a
// response's headers after a request is sent: a backstop under the retry
// decorator's per-attempt timeout (storage/stack), so that not even an
// undecorated driver waits forever on a server that never answers.
const ResponseHeaderTimeout = 2 * time.Minute
