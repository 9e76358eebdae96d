// Package httpstore is a read-only storage.Bucket over plain HTTP(S): any
// web server, CDN or presigned prefix that serves a dataset's files.
//
// # URLs
//
// "https://host/path/to/dataset" (or "http://...") names the root; the
// object key "shard.00000.mds" is fetched from
// "https://host/path/to/dataset/shard.00000.mds", each key element
// percent-escaped. A query string on the root URL (a static token) is sent
// with every request; user information in the URL is sent as HTTP basic
// authentication. Neither appears in error messages.
//
// # Operations
//
// Stat uses HEAD (falling back to a one-byte ranged GET where HEAD is
// refused or gives no length); reads use GET with a Range header and check
// the Content-Range the server answers with. A server that ignores Range
// still works: the reader skips to the offset. Writes and Delete fail with
// storage.ErrReadOnly; List fails with errors.ErrUnsupported, since HTTP
// has no listing (datasets are found through their index.json).
//
// Non-success responses become *storage.HTTPError (with Retry-After), so
// the retry decorator classifies them; wrap the Bucket with package retry.
//
// # Integrity
//
// Where the server sends the object's checksum — GCS's x-goog-hash CRC32C
// on its public URLs, S3's x-amz-checksum-* (asked for with
// x-amz-checksum-mode, except on presigned URLs, whose signature would not
// cover it) — a whole-object read is checked against it when its body
// ends (a mismatch matches storage.ErrChecksum, which the retry decorator
// does not resume past), and Stat reports it, so that a reader of ranges
// can check them together (storage.RangeCheck). Other servers' bytes go
// unchecked.
package httpstore

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicedata/sluice/storage"
)

// Options tunes a Bucket. A nil *Options means the defaults.
type Options struct {
	// Client sends the requests. Nil means a client with a connection pool
	// sized for parallel downloads and no overall timeout (contexts and
	// the retry decorator bound each request).
	Client *http.Client
	// Header is added to every request (for example Authorization).
	Header http.Header
}

// Bucket is a read-only storage.Bucket over HTTP. It is safe for
// concurrent use.
type Bucket struct {
	base   *url.URL // with a trailing "/" on its path; no user info
	user   *url.Userinfo
	client *http.Client
	own    bool // the client is ours to close
	header http.Header

	// mu guards closed.
	mu     sync.RWMutex
	closed bool
}

var _ storage.Bucket = (*Bucket)(nil)

// New returns a Bucket rooted at the http or https URL base. opts may be
// nil.
func New(base string, opts *Options) (*Bucket, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("httpstore: bad URL %q: %w", base, err)
	}
	return newBucket(u, opts)
}

// Open is a storage.Opener for http and https URLs.
func Open(_ context.Context, u *url.URL) (storage.Bucket, error) {
	return newBucket(u, nil)
}

func newBucket(u *url.URL, opts *Options) (*Bucket, error) {
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("httpstore: URL %s: scheme must be http or https", u.Redacted())
	}
	if u.Host == "" {
		return nil, fmt.Errorf("httpstore: URL %s: no host", u.Redacted())
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	base := *u
	base.Fragment, base.RawFragment = "", ""
	user := base.User
	base.User = nil
	if !strings.HasSuffix(base.Path, "/") {
		base.Path += "/"
		if base.RawPath != "" {
			base.RawPath += "/"
		}
	}
	b := &Bucket{base: &base, user: user, client: o.Client, header: o.Header.Clone()}
	if b.client == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConns = 256
		t.MaxIdleConnsPerHost = 64
		// A backstop deadline for a server that accepts and never answers,
		// for callers without the retry decorator's per-attempt timeout.
		t.ResponseHeaderTimeout = storage.ResponseHeaderTimeout
		b.client = &http.Client{Transport: t}
		b.own = true
	}
	return b, nil
}

// objectURL returns the URL of key, query string included.
func (b *Bucket) objectURL(key string) *url.URL {
	u := *b.base
	elems := strings.Split(key, "/")
	for i, e := range elems {
		elems[i] = url.PathEscape(e)
	}
	u.Path = b.base.Path + key
	u.RawPath = b.base.EscapedPath() + strings.Join(elems, "/")
	return &u
}

// URL implements storage.Bucket; the query string is left out.
func (b *Bucket) URL(key string) string {
	u := b.objectURL(key)
	u.RawQuery = ""
	return u.String()
}

func (b *Bucket) check(op, key string) error {
	if err := storage.ValidateKey(key); err != nil {
		return fmt.Errorf("httpstore: %s: %w", op, err)
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return fmt.Errorf("httpstore: %s %s: %w", op, b.URL(key), storage.ErrClosed)
	}
	return nil
}

// do sends a request for key.
func (b *Bucket) do(ctx context.Context, method, key, rangeHeader string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, b.objectURL(key).String(), nil)
	if err != nil {
		return nil, err
	}
	for k, vs := range b.header {
		req.Header[k] = vs
	}
	if b.user != nil {
		pw, _ := b.user.Password()
		req.SetBasicAuth(b.user.Username(), pw)
	}
	if rangeHeader != "" {
		req.Header.Set("Range", rangeHeader)
	}
	// Ask for the bytes as stored, so that lengths and ranges refer to them.
	req.Header.Set("Accept-Encoding", "identity")
	if b.base.RawQuery == "" {
		// S3 (a public object) then sends the object's checksum, which
		// the body is checked against (see headerChecksum). Not on a
		// presigned URL: S3 refuses x-amz- headers its signature does
		// not cover.
		req.Header.Set("X-Amz-Checksum-Mode", "ENABLED")
	}
	resp, err := b.client.Do(req)
	if err != nil {
		return nil, stripURLError(err)
	}
	return resp, nil
}

// stripURLError drops the *url.Error wrapper, whose message repeats the
// URL with its query string; the caller names the URL itself.
func stripURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", strings.ToLower(ue.Op), ue.Err)
	}
	return err
}

// statusError turns a non-success response into a *storage.HTTPError and
// closes its body.
func (b *Bucket) statusError(op, key string, resp *http.Response) error {
	defer resp.Body.Close()
	var cause error
	if op != "stat" {
		snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
		if s := strings.TrimSpace(strings.ToValidUTF8(string(snippet), "?")); s != "" {
			cause = fmt.Errorf("server said: %q", s)
		}
	}
	return fmt.Errorf("httpstore: %w", &storage.HTTPError{
		Op:         op,
		URL:        b.URL(key),
		StatusCode: resp.StatusCode,
		RetryAfter: storage.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now()),
		Err:        cause,
	})
}

// Stat implements storage.Bucket.
func (b *Bucket) Stat(ctx context.Context, key string) (storage.ObjectInfo, error) {
	if err := b.check("stat", key); err != nil {
		return storage.ObjectInfo{}, err
	}
	resp, err := b.do(ctx, http.MethodHead, key, "")
	if err != nil {
		return storage.ObjectInfo{}, fmt.Errorf("httpstore: stat %s: %w", b.URL(key), err)
	}
	resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusOK && resp.ContentLength >= 0:
		return info(key, resp, resp.ContentLength), nil
	case resp.StatusCode == http.StatusOK,
		resp.StatusCode == http.StatusMethodNotAllowed,
		resp.StatusCode == http.StatusNotImplemented,
		resp.StatusCode == http.StatusForbidden && b.base.RawQuery != "":
		// No length, or HEAD refused (a presigned GET URL signs the
		// method): ask for one byte instead.
		return b.statByGet(ctx, key)
	}
	return storage.ObjectInfo{}, b.statusError("stat", key, resp)
}

// statByGet learns the size from the Content-Range of a one-byte GET.
func (b *Bucket) statByGet(ctx context.Context, key string) (storage.ObjectInfo, error) {
	resp, err := b.do(ctx, http.MethodGet, key, "bytes=0-0")
	if err != nil {
		return storage.ObjectInfo{}, fmt.Errorf("httpstore: stat %s: %w", b.URL(key), err)
	}
	switch resp.StatusCode {
	case http.StatusPartialContent:
		resp.Body.Close()
		_, _, total, err := parseContentRange(resp.Header.Get("Content-Range"))
		if err != nil || total < 0 {
			return storage.ObjectInfo{}, fmt.Errorf("httpstore: stat %s: %w", b.URL(key), storage.Permanent(fmt.Errorf("server gave no object size: %v", err)))
		}
		return info(key, resp, total), nil
	case http.StatusRequestedRangeNotSatisfiable:
		resp.Body.Close()
		return info(key, resp, 0), nil // an empty object
	case http.StatusOK:
		// The server ignores Range: count the body.
		defer resp.Body.Close()
		n, err := io.Copy(io.Discard, resp.Body)
		if err != nil {
			return storage.ObjectInfo{}, fmt.Errorf("httpstore: stat %s: %w", b.URL(key), err)
		}
		return info(key, resp, n), nil
	}
	return storage.ObjectInfo{}, b.statusError("stat", key, resp)
}

func info(key string, resp *http.Response, size int64) storage.ObjectInfo {
	oi := storage.ObjectInfo{Key: key, Size: size, ETag: strings.Trim(resp.Header.Get("ETag"), `"`),
		Checksum: headerChecksum(resp.Header)}
	if t, err := http.ParseTime(resp.Header.Get("Last-Modified")); err == nil {
		oi.ModTime = t
	}
	return oi
}

// parseContentRange parses "bytes first-last/total" or "bytes */total";
// first and last are -1 in the second form, total -1 when "*".
func parseContentRange(v string) (first, last, total int64, err error) {
	bad := fmt.Errorf("malformed Content-Range %q", v)
	rest, ok := strings.CutPrefix(v, "bytes ")
	if !ok {
		return 0, 0, 0, bad
	}
	rng, tot, ok := strings.Cut(rest, "/")
	if !ok {
		return 0, 0, 0, bad
	}
	total = -1
	if tot != "*" {
		if total, err = strconv.ParseInt(tot, 10, 64); err != nil || total < 0 {
			return 0, 0, 0, bad
		}
	}
	if rng == "*" {
		return -1, -1, total, nil
	}
	f, l, ok := strings.Cut(rng, "-")
	if !ok {
		return 0, 0, 0, bad
	}
	first, err1 := strconv.ParseInt(f, 10, 64)
	last, err2 := strconv.ParseInt(l, 10, 64)
	if err1 != nil || err2 != nil || first < 0 || last < first || (total >= 0 && last >= total) {
		return 0, 0, 0, bad
	}
	return first, last, total, nil
}

// NewRangeReader implements storage.Bucket.
func (b *Bucket) NewRangeReader(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	if err := b.check("get", key); err != nil {
		return nil, err
	}
	if off < 0 {
		return nil, storage.Permanent(fmt.Errorf("httpstore: get %s: negative offset %d", b.URL(key), off))
	}
	if length == 0 {
		// Nothing to fetch; the object must still exist and reach off.
		oi, err := b.Stat(ctx, key)
		if err != nil {
			return nil, err
		}
		if off > oi.Size {
			return nil, fmt.Errorf("httpstore: get %s: offset %d beyond size %d: %w", b.URL(key), off, oi.Size, storage.ErrPrecondition)
		}
		return http.NoBody, nil
	}
	var rangeHeader string
	switch {
	case length > 0 && off+length > off: // no overflow
		rangeHeader = fmt.Sprintf("bytes=%d-%d", off, off+length-1)
	case off > 0:
		rangeHeader = fmt.Sprintf("bytes=%d-", off)
	}
	resp, err := b.do(ctx, http.MethodGet, key, rangeHeader)
	if err != nil {
		return nil, fmt.Errorf("httpstore: get %s: %w", b.URL(key), err)
	}
	switch resp.StatusCode {
	case http.StatusPartialContent:
		first, last, _, err := parseContentRange(resp.Header.Get("Content-Range"))
		if err == nil && first != off {
			err = fmt.Errorf("asked for offset %d, got Content-Range %q", off, resp.Header.Get("Content-Range"))
		}
		if err != nil {
			resp.Body.Close()
			return nil, fmt.Errorf("httpstore: get %s: %w", b.URL(key), storage.Permanent(err))
		}
		n := last - first + 1
		if length > 0 {
			n = min(n, length)
		}
		return &body{ctx: ctx, rc: resp.Body, r: io.LimitReader(resp.Body, n)}, nil
	case http.StatusOK:
		// The whole object: skip to off ourselves.
		if off > 0 {
			skipped, err := io.CopyN(io.Discard, resp.Body, off)
			if err != nil && !errors.Is(err, io.EOF) {
				resp.Body.Close()
				return nil, fmt.Errorf("httpstore: get %s: %w", b.URL(key), err)
			}
			if skipped < off {
				resp.Body.Close()
				return nil, fmt.Errorf("httpstore: get %s: offset %d beyond size %d: %w", b.URL(key), off, skipped, storage.ErrPrecondition)
			}
		}
		var r io.Reader = resp.Body
		if length > 0 {
			r = io.LimitReader(resp.Body, length)
		}
		out := &body{ctx: ctx, rc: resp.Body, r: r}
		if off == 0 && length < 0 && resp.ContentLength >= 0 && !resp.Uncompressed {
			// The whole object as stored: the response's headers say
			// what Stat's HEAD would, so a caller that wants them makes
			// no second request; and the body is checked against the
			// object's checksum where the server sends one.
			out.info, out.hasInfo = info(key, resp, resp.ContentLength), true
			out.r = storage.CheckedReader(r, out.info.Checksum, b.URL(key))
		}
		return out, nil
	case http.StatusRequestedRangeNotSatisfiable:
		// off is at or past the end; at the end is an empty read.
		_, _, total, perr := parseContentRange(resp.Header.Get("Content-Range"))
		if perr != nil || total < 0 {
			oi, err := b.Stat(ctx, key)
			if err != nil {
				resp.Body.Close()
				return nil, err
			}
			total = oi.Size
		}
		if off == total {
			resp.Body.Close()
			return http.NoBody, nil
		}
		return nil, b.statusError("get", key, resp)
	}
	return nil, b.statusError("get", key, resp)
}

// body is a response body limited to the range asked for. It checks its
// request's context on every Read, since bytes the transport has already
// buffered would otherwise still flow after a cancellation.
type body struct {
	ctx context.Context
	rc  io.ReadCloser
	r   io.Reader
	// info is what a response for the whole object told of it (see
	// storage.InfoReader).
	info    storage.ObjectInfo
	hasInfo bool
}

// ObjectInfo implements storage.InfoReader.
func (b *body) ObjectInfo() (storage.ObjectInfo, bool) { return b.info, b.hasInfo }

// ContinueCheck implements storage.ResumableCheck: a whole-object body
// checked against the server's checksum carries its sum over to the
// ranged response that resumes it.
func (b *body) ContinueCheck(rest io.Reader) io.Reader { return storage.ContinueCheck(b.r, rest) }

func (b *body) Read(p []byte) (int, error) {
	if err := b.ctx.Err(); err != nil {
		return 0, err
	}
	return b.r.Read(p)
}
func (b *body) Close() error { return b.rc.Close() }

// NewWriter implements storage.Bucket; it always fails with
// storage.ErrReadOnly.
func (b *Bucket) NewWriter(_ context.Context, key string, _ *storage.WriteOptions) (io.WriteCloser, error) {
	return nil, fmt.Errorf("httpstore: put %s: %w", b.URL(key), storage.ErrReadOnly)
}

// Delete implements storage.Bucket; it always fails with
// storage.ErrReadOnly.
func (b *Bucket) Delete(_ context.Context, key string) error {
	return fmt.Errorf("httpstore: delete %s: %w", b.URL(key), storage.ErrReadOnly)
}

// List implements storage.Bucket; HTTP cannot list, so it fails with an
// error matching errors.ErrUnsupported.
func (b *Bucket) List(_ context.Context, prefix string, _ func(storage.ObjectInfo) error) error {
	b.mu.RLock()
	closed := b.closed
	b.mu.RUnlock()
	if closed {
		return fmt.Errorf("httpstore: list %s: %w", b.URL(prefix), storage.ErrClosed)
	}
	return fmt.Errorf("httpstore: list %s: HTTP servers cannot list objects: %w", b.URL(prefix), errors.ErrUnsupported)
}

// Close implements storage.Bucket.
func (b *Bucket) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return fmt.Errorf("httpstore: close %s: %w", b.URL(""), storage.ErrClosed)
	}
	b.closed = true
	if b.own {
		b.client.CloseIdleConnections()
	}
	return nil
}

// headerChecksum returns the object's checksum that a response's headers
// carry: S3's x-amz-checksum-* (sent when asked with x-amz-checksum-mode;
// not a multipart upload's checksum of parts), else the CRC32C of GCS's
// x-goog-hash (sent for every object; not when the body is transcoded).
// The headers describe the whole object, a ranged response's too. The
// zero Checksum when none.
func headerChecksum(h http.Header) storage.Checksum {
	if !strings.EqualFold(h.Get("X-Amz-Checksum-Type"), "COMPOSITE") {
		for _, alg := range []string{"CRC64NVME", "CRC32", "CRC32C", "SHA256", "SHA1"} {
			v := h.Get("X-Amz-Checksum-" + alg)
			if v == "" {
				continue
			}
			if sum, err := base64.StdEncoding.DecodeString(v); err == nil { // not "...-N"
				return storage.Checksum{Algorithm: alg, Value: sum}
			}
			break
		}
	}
	if stored := h.Get("X-Goog-Stored-Content-Encoding"); stored != "" && !strings.EqualFold(stored, "identity") &&
		!strings.EqualFold(h.Get("Content-Encoding"), stored) {
		// GCS's decompressive transcoding: an object stored with
		// Content-Encoding: gzip is served decompressed (to
		// Accept-Encoding: identity), and x-goog-hash is the stored,
		// compressed bytes' hash, which the body cannot match.
		return storage.Checksum{}
	}
	for _, v := range h.Values("X-Goog-Hash") {
		for _, kv := range strings.Split(v, ",") {
			name, val, _ := strings.Cut(strings.TrimSpace(kv), "=")
			if !strings.EqualFold(name, "crc32c") {
				continue
			}
			if sum, err := base64.StdEncoding.DecodeString(val); err == nil && len(sum) == 4 {
				return storage.Checksum{Algorithm: "CRC32C", Value: sum}
			}
		}
	}
	return storage.Checksum{}
}
