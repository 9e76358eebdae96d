package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/sluicedata/sluice/storage"
)

// maxPrealloc bounds the buffer allocated for an object before its bytes
// arrive.
const maxPrealloc = 4 << 20

// Connection settings of the Fetcher's own HTTP client.
const (
	DefaultDialTimeout = 10 * time.Second
	DefaultKeepAlive   = 30 * time.Second
)

// newHTTPClient returns the client for http(s) URLs: every dial passes
// the policy's address check, redirects are bounded and stay on http(s),
// no proxy from the environment is used (a proxy would dial on our behalf
// and bypass the address check), and the pool is sized for the fetch
// concurrency.
func newHTTPClient(o *Options) *http.Client {
	t := &http.Transport{
		DialContext:           o.Policy.dialer().DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          o.Concurrency,
		MaxIdleConnsPerHost:   o.PerHost,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true, // the stored bytes are the object's bytes
	}
	maxRedirects := o.Policy.MaxRedirects
	if maxRedirects == 0 {
		maxRedirects = DefaultMaxRedirects
	}
	return &http.Client{
		Transport: t,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > maxRedirects || maxRedirects < 0 {
				return fmt.Errorf("%w: more than %d redirects", ErrRedirect, max(maxRedirects, 0))
			}
			if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
				return fmt.Errorf("%w: to scheme %q", ErrRedirect, req.URL.Scheme)
			}
			return o.Policy.checkHost(req.URL.Host)
		},
	}
}

// httpGet fetches one http(s) URL: a single GET, the body read with the
// size cap (a declared length over it fails before reading).
func (f *Fetcher) httpGet(ctx context.Context, u string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, storage.Permanent(err)
	}
	req.Header.Set("Accept-Encoding", "identity")
	if f.opts.UserAgent != "" {
		req.Header.Set("User-Agent", f.opts.UserAgent)
	}
	resp, err := f.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the caller names the URL
		}
		if errors.Is(err, ErrBlockedAddress) || errors.Is(err, ErrRedirect) {
			return nil, storage.Permanent(err)
		}
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10)) // lets the connection be reused
		herr := &storage.HTTPError{
			Op: "get", URL: redact(u), StatusCode: resp.StatusCode,
			RetryAfter: storage.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now()),
		}
		return nil, fmt.Errorf("fetch: %w", herr)
	}
	if resp.ContentLength > f.opts.MaxBytes {
		return nil, fmt.Errorf("%w: declared %d bytes, cap %d", errTooLarge, resp.ContentLength, f.opts.MaxBytes)
	}
	// Preallocate what the server declares, up to maxPrealloc: memory
	// grows with the bytes that arrive, not with what a header claims.
	var buf []byte
	if resp.ContentLength >= 0 {
		buf = make([]byte, 0, min(resp.ContentLength+1, maxPrealloc))
	}
	data, err := readCapped(resp.Body, buf, f.opts.MaxBytes)
	if err != nil {
		return nil, err
	}
	return data, nil
}

// readCapped reads r to the end into buf, failing with errTooLarge past
// limit bytes.
func readCapped(r io.Reader, buf []byte, limit int64) ([]byte, error) {
	lr := io.LimitReader(r, limit+1)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := lr.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return nil, fmt.Errorf("%w: more than %d bytes", errTooLarge, limit)
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// readLocal reads a local file under the policy's file root. The file is
// opened through an os.Root, so neither ".." nor a symbolic link leads out
// of the root.
func (f *Fetcher) readLocal(path string) ([]byte, error) {
	rel, err := f.opts.Policy.relToRoot(path)
	if err != nil {
		return nil, storage.Permanent(err)
	}
	fh, err := f.root.Open(rel)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: %w", storage.ErrNotExist, err)
		}
		if strings.Contains(err.Error(), "escapes") || strings.Contains(err.Error(), "outside") {
			return nil, storage.Permanent(fmt.Errorf("%w: %w", ErrOutsideRoot, err))
		}
		return nil, storage.Permanent(err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, storage.Permanent(fmt.Errorf("%s is not a regular file", path))
	}
	if st.Size() > f.opts.MaxBytes {
		return nil, fmt.Errorf("%w: %d bytes, cap %d", errTooLarge, st.Size(), f.opts.MaxBytes)
	}
	return readCapped(fh, make([]byte, 0, min(st.Size()+1, maxPrealloc)), f.opts.MaxBytes)
}

// redact drops the query string and user information of a URL for
// messages (they may carry tokens).
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	u.User = nil
	u.RawQuery = ""
	return u.String()
}
