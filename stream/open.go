package stream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/compress"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/retry"
	"github.com/sluicedata/sluice/storage/stack"
)

// DefaultMaxIndexBytes is the most bytes of a remote index.json Open
// reads (MosaicML indexes of 40,000 shards take tens of MB); a larger or
// endless one fails with an error naming the limit.
const DefaultMaxIndexBytes = 256 << 20

// maxIndexBytes bounds a downloaded index.json.
const maxIndexBytes = DefaultMaxIndexBytes

// ErrIndexTooLarge is matched (errors.Is) by the error for a remote
// index.json longer than Options.MaxIndexBytes.
var ErrIndexTooLarge = errors.New("index.json is larger than the limit")

// capIndex returns b with reads of index.json cut off after limit bytes
// (zero: DefaultMaxIndexBytes), failing with ErrIndexTooLarge, a
// permanent error: an endless body is never retried or held whole.
func capIndex(b storage.Bucket, limit int64) storage.Bucket {
	if limit <= 0 {
		limit = DefaultMaxIndexBytes
	}
	return &indexCap{Bucket: b, limit: limit}
}

type indexCap struct {
	storage.Bucket
	limit int64
}

func (b *indexCap) NewRangeReader(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	r, err := b.Bucket.NewRangeReader(ctx, key, off, length)
	if err != nil || key != format.IndexFile {
		return r, err
	}
	return &capReader{ReadCloser: r, left: b.limit - off, limit: b.limit, url: b.URL(key)}, nil
}

// capReader fails once more than its limit has been read.
type capReader struct {
	io.ReadCloser
	left, limit int64
	url         string
}

// ObjectInfo implements storage.InfoReader for the reader it wraps.
func (r *capReader) ObjectInfo() (storage.ObjectInfo, bool) { return storage.ReaderInfo(r.ReadCloser) }

func (r *capReader) Read(p []byte) (int, error) {
	if r.left < 0 {
		return 0, storage.Permanent(fmt.Errorf("%s: %w of %d bytes (Options.MaxIndexBytes; an endless or hostile response?)", r.url, ErrIndexTooLarge, r.limit))
	}
	if int64(len(p)) > r.left+1 {
		p = p[:r.left+1]
	}
	n, err := r.ReadCloser.Read(p)
	r.left -= int64(n)
	if r.left < 0 {
		return n - 1, storage.Permanent(fmt.Errorf("%s: %w of %d bytes (Options.MaxIndexBytes; an endless or hostile response?)", r.url, ErrIndexTooLarge, r.limit))
	}
	return n, err
}

// ErrIndexChanged is matched (errors.Is) by the error Open returns when a
// remote's index.json no longer matches the copy in the cache: the
// dataset was replaced since it was cached.
var ErrIndexChanged = errors.New("the remote index changed")

// stackOptions returns the decorator settings for a stream whose download
// attempts are bounded by timeout: the caller's retry policy, with the
// attempt timeout (the wait for a response to begin) set to timeout
// unless the policy sets its own, and the caller's StoreInner.
func (o *Options) stackOptions(timeout time.Duration) *stack.Options {
	var r retry.Options
	if o.Retry != nil {
		r = *o.Retry
	}
	if r.AttemptTimeout == 0 && timeout > 0 {
		r.AttemptTimeout = timeout
	}
	return &stack.Options{MaxInFlight: o.MaxInFlight, Retry: &r, Inner: o.StoreInner}
}

// openStore opens a stream's root through the Registry and the standard
// decorators (storage/stack): retries with backoff, Retry-After, stall
// detection and a budget, a bound on requests in flight, and an attempt
// timeout. A Registry whose openers do not decorate gets them here, so no
// stream ever reads a store undecorated.
func openStore(ctx context.Context, o *Options, root string, timeout time.Duration) (storage.Bucket, error) {
	so := o.stackOptions(timeout)
	b, err := o.Registry.Open(stack.WithOptions(ctx, so), root)
	if err != nil {
		return nil, fmt.Errorf("stream: %w", err)
	}
	b, err = stack.Wrap(b, so)
	if err != nil {
		return nil, fmt.Errorf("stream: open %s: %w", redactURL(root), err)
	}
	return b, nil
}

// indexETagSuffix names the file beside a cached index.json that holds the
// store's ETag of it when it was cached (stores that give one: S3, GCS,
// Azure, most HTTP servers).
const indexETagSuffix = ".etag"

// checkIndexFresh compares the cached index.json at local with the
// store's (one Stat, once per open): a different size, a different ETag
// than the one recorded when it was cached (when the store gives one), or
// a store copy modified after the cached one, means the remote dataset
// was replaced.
func checkIndexFresh(ctx context.Context, b storage.Bucket, local string) error {
	fi, err := os.Stat(local)
	if err != nil {
		return fmt.Errorf("stream: %w", err)
	}
	info, err := b.Stat(ctx, format.IndexFile)
	if errors.Is(err, storage.ErrNotExist) {
		// No index.json in the store (a tar dataset whose index Sluice
		// built, or a removed dataset, which its shards' fetches report).
		return nil
	}
	if err != nil {
		return fmt.Errorf("stream: check %s against the cached copy: %w", b.URL(format.IndexFile), err)
	}
	if info.Size != fi.Size() {
		return fmt.Errorf("stream: %s: %w: %d bytes in the store, %d in the cached copy %s (remove the cache directory, or use another, to stream the new dataset)",
			b.URL(format.IndexFile), ErrIndexChanged, info.Size, fi.Size(), local)
	}
	// The ETag recorded when the copy was cached; none for a copy cached
	// by an older Sluice or from a store without ETags (size and time
	// decide then).
	if tag, err := os.ReadFile(local + indexETagSuffix); err == nil && len(tag) > 0 && info.ETag != "" && string(tag) != info.ETag {
		return fmt.Errorf("stream: %s: %w: ETag %s in the store, %s when the cached copy %s was downloaded (remove the cache directory, or use another, to stream the new dataset)",
			b.URL(format.IndexFile), ErrIndexChanged, info.ETag, tag, local)
	}
	// The cached copy's mtime is set to the store's ModTime when it is
	// downloaded; an older cache holds the download time, later still.
	if !info.ModTime.IsZero() && info.ModTime.After(fi.ModTime().Add(time.Second)) {
		return fmt.Errorf("stream: %s: %w: modified %s in the store, after the cached copy %s (remove the cache directory, or use another, to stream the new dataset)",
			b.URL(format.IndexFile), ErrIndexChanged, info.ModTime.UTC().Format(time.RFC3339), local)
	}
	return nil
}

// statIndex looks up the store's index.json after n bytes of it were
// downloaded (n < 0: a selection of it, of no comparable size), for what
// is recorded of it (ModTime, ETag). ok is false when the store cannot
// tell, or when it now holds another size (replaced during the download:
// recording the new object's tags against the old bytes would hide the
// change from the next open).
func statIndex(ctx context.Context, b storage.Bucket, n int64) (info storage.ObjectInfo, ok bool) {
	info, err := b.Stat(ctx, format.IndexFile)
	return info, err == nil && (n < 0 || info.Size == n)
}

// stampIndex sets the cached index's mtime to the store's ModTime (see
// checkIndexFresh). Failing to is harmless: the download time is later.
func stampIndex(local string, info storage.ObjectInfo) {
	if !info.ModTime.IsZero() {
		_ = os.Chtimes(local, info.ModTime, info.ModTime)
	}
}

// ErrHTML is matched (errors.Is) by the error for an index.json that is
// an HTML page: a proxy, login or captive portal answered instead of the
// store.
var ErrHTML = errors.New("the server returned HTML, not index.json (a proxy, login page or captive portal answered?)")

// looksLikeHTML reports whether b starts like an HTML document.
func looksLikeHTML(b []byte) bool {
	b = bytes.TrimLeft(b, " \t\r\n\ufeff")
	if len(b) > 0 && b[0] != '<' {
		return false
	}
	head := bytes.ToLower(b[:min(len(b), 512)])
	for _, p := range [][]byte{[]byte("<!doctype html"), []byte("<html"), []byte("<head"), []byte("<body"), []byte("<!--"), []byte("<meta"), []byte("<title")} {
		if bytes.HasPrefix(head, p) {
			return true
		}
	}
	return bytes.Contains(head, []byte("<html"))
}

// checkRatios fails when a compressed shard of st claims more raw bytes
// than the compression ratio cap allows (a decompression bomb, or a lying
// index), before any space is reserved for it.
func checkRatios(name string, st *streamState, maxRatio int64) error {
	for k := range st.numShards() {
		for _, p := range [2][2]int{{format.RawData, format.ZipData}, {format.RawMeta, format.ZipMeta}} {
			_, raw, ok := st.file(k, p[0])
			zname, zip, zok := st.file(k, p[1])
			if !ok || !zok {
				continue
			}
			if err := compress.CheckRatio(zip, raw, maxRatio); err != nil {
				return fmt.Errorf("stream: %s: shard %d (%s): %w", name, k, zname, err)
			}
		}
	}
	return nil
}

// redactURL hides the password of a URL with user information.
func redactURL(raw string) string { return storage.RedactURL(raw) }
