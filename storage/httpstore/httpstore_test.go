package httpstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/filestore"
	"github.com/sluicedata/sluice/storage/httpstore"
	"github.com/sluicedata/sluice/storage/retry"
	"github.com/sluicedata/sluice/storage/storagetest"
)

// fileServer serves the files of dir below /data/, with the standard
// library's Range, HEAD and 416 handling. With ignoreRange it answers every
// GET with the whole file, as some servers do.
func fileServer(t *testing.T, dir string, ignoreRange bool) http.Handler {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, ok := strings.CutPrefix(r.URL.Path, "/data/")
		if !ok || storage.ValidateKey(key) != nil {
			http.NotFound(w, r)
			return
		}
		f, err := root.Open(key)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil || !fi.Mode().IsRegular() {
			http.NotFound(w, r)
			return
		}
		if ignoreRange {
			r.Header.Del("Range")
		}
		http.ServeContent(w, r, "", fi.ModTime(), f)
	})
}

type serverKind int

const (
	plainHTTP serverKind = iota
	tlsHTTP
	noRangeHTTP
)

// newStore starts a server over a fresh directory and returns the
// httpstore bucket reading it and a filestore bucket writing it.
func newStore(t *testing.T, kind serverKind) (*httpstore.Bucket, storage.Bucket) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	h := fileServer(t, dir, kind == noRangeHTTP)
	srv := httptest.NewUnstartedServer(h)
	// Closing the server mid-handshake is expected; keep it off the log.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	if kind == tlsHTTP {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	b, err := httpstore.New(srv.URL+"/data", &httpstore.Options{Client: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	w, err := filestore.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return b, w
}

func TestConformance(t *testing.T) {
	for _, tc := range []struct {
		name string
		kind serverKind
	}{{"http", plainHTTP}, {"https", tlsHTTP}, {"server ignores Range", noRangeHTTP}} {
		t.Run(tc.name, func(t *testing.T) {
			storagetest.RunWith(t, func(t *testing.T) (storage.Bucket, storage.Bucket) {
				return newStore(t, tc.kind)
			}, &storagetest.Options{ReadOnly: true, NoList: true})
		})
	}
}

func TestURLs(t *testing.T) {
	b, err := httpstore.New("https://user:secret@cdn.example.com/datasets/a%20b?sig=abc", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if got, want := b.URL("dir/x y?.mds"), "https://cdn.example.com/datasets/a%20b/dir/x%20y%3F.mds"; got != want {
		t.Errorf("URL = %q, want %q", got, want)
	}
	for _, bad := range []string{"ftp://x/y", "https://", "://"} {
		if _, err := httpstore.New(bad, nil); err == nil {
			t.Errorf("New(%q) succeeded", bad)
		}
	}
}

// TestAuthAndQuery checks that user info becomes basic auth and the query
// string of the root travels with every request.
func TestAuthAndQuery(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, _ := r.BasicAuth()
		mu.Lock()
		seen = append(seen, fmt.Sprintf("%s %s %s:%s %s", r.Method, r.URL.Path, u, p, r.URL.RawQuery))
		mu.Unlock()
		if r.URL.Query().Get("token") != "t1" {
			http.Error(w, "bad token", http.StatusForbidden)
			return
		}
		http.ServeContent(w, r, "", time.Time{}, strings.NewReader("hello"))
	}))
	defer srv.Close()
	b, err := httpstore.New(strings.Replace(srv.URL, "http://", "http://ann:pw@", 1)+"/d?token=t1", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if got := storagetest.Get(t, b, "k"); string(got) != "hello" {
		t.Errorf("got %q", got)
	}
	if len(seen) != 1 || seen[0] != "GET /d/k ann:pw token=t1" {
		t.Errorf("requests: %q", seen)
	}
	bad, _ := httpstore.New(srv.URL+"/d?token=wrong", nil)
	defer bad.Close()
	_, err = bad.NewRangeReader(t.Context(), "k", 0, -1)
	if !errors.Is(err, storage.ErrPermission) || storage.IsRetryable(err) {
		t.Errorf("403 = %v, want ErrPermission, not retryable", err)
	}
	if strings.Contains(err.Error(), "wrong") && !strings.Contains(err.Error(), "server said") {
		t.Errorf("error leaks the query string: %v", err)
	}
}

func TestStatusErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/throttled":
			w.Header().Set("Retry-After", "3")
			w.WriteHeader(http.StatusTooManyRequests)
		case "/busy":
			w.WriteHeader(http.StatusServiceUnavailable)
		case "/gone":
			w.WriteHeader(http.StatusGone)
		default:
			w.WriteHeader(http.StatusBadRequest)
		}
	}))
	defer srv.Close()
	b, _ := httpstore.New(srv.URL, nil)
	defer b.Close()
	tests := []struct {
		key        string
		status     int
		retry      bool
		retryAfter time.Duration
		sentinel   error
	}{
		{"throttled", 429, true, 3 * time.Second, nil},
		{"busy", 503, true, 0, nil},
		{"gone", 410, false, 0, storage.ErrNotExist},
		{"bad", 400, false, 0, nil},
	}
	for _, tt := range tests {
		for _, op := range []string{"stat", "get"} {
			var err error
			if op == "stat" {
				_, err = b.Stat(t.Context(), tt.key)
			} else {
				_, err = b.NewRangeReader(t.Context(), tt.key, 0, -1)
			}
			if storage.HTTPStatus(err) != tt.status || storage.IsRetryable(err) != tt.retry ||
				storage.RetryAfter(err) != tt.retryAfter || (tt.sentinel != nil && !errors.Is(err, tt.sentinel)) {
				t.Errorf("%s %s = %v (status %d, retryable %v, retry-after %v)", op, tt.key, err,
					storage.HTTPStatus(err), storage.IsRetryable(err), storage.RetryAfter(err))
			}
			if !strings.Contains(err.Error(), srv.URL+"/"+tt.key) {
				t.Errorf("error %q does not name the URL", err)
			}
		}
	}
}

// faultyStore puts a FaultProxy between an httpstore bucket and a real
// file server, and wraps the bucket with retries that do not wait.
func faultyStore(t *testing.T, o *retry.Options) (*storagetest.FaultProxy, storage.Bucket, storage.Bucket) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	srv := httptest.NewServer(fileServer(t, dir, false))
	t.Cleanup(srv.Close)
	proxy, err := storagetest.NewFaultProxy(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	hb, err := httpstore.New(proxy.URL+"/data", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hb.Close() })
	if o == nil {
		o = &retry.Options{}
	}
	o.Sleep = func(ctx context.Context, d time.Duration) error { return ctx.Err() }
	if o.AttemptTimeout == 0 {
		o.AttemptTimeout = 10 * time.Second // a hang fails the test soon
	}
	rb, err := retry.New(hb, o)
	if err != nil {
		t.Fatal(err)
	}
	w, err := filestore.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return proxy, rb, w
}

func isGet(r *http.Request) bool { return r.Method == http.MethodGet }

// longGet matches a GET whose response is longer than n bytes (a Range of
// more, or none), so that a body fault at n is always injected: a fault
// taken by a shorter response (the 5-byte last part) is spent unseen.
func longGet(n int64) func(*http.Request) bool {
	return func(r *http.Request) bool {
		if r.Method != http.MethodGet {
			return false
		}
		var a, b int64
		if _, err := fmt.Sscanf(r.Header.Get("Range"), "bytes=%d-%d", &a, &b); err != nil {
			return r.Header.Get("Range") == ""
		}
		return b-a+1 > n
	}
}

func TestDownloadThroughFaultProxy(t *testing.T) {
	data := storagetest.Pattern(7, 3<<20+5)
	tests := []struct {
		name   string
		faults []storagetest.ProxyFault
		kind   storagetest.ProxyFaultKind
	}{
		{"reset mid-body", []storagetest.ProxyFault{{Kind: storagetest.Reset, Method: "GET", AfterBytes: 100_000, Times: 3}}, storagetest.Reset},
		{"truncated body", []storagetest.ProxyFault{{Kind: storagetest.Truncate, Method: "GET", AfterBytes: 70_000, Times: 3}}, storagetest.Truncate},
		{"stalled body", []storagetest.ProxyFault{{Kind: storagetest.Stall, Method: "GET", AfterBytes: 50_000, Times: 2}}, storagetest.Stall},
		{"503 SlowDown with Retry-After", []storagetest.ProxyFault{{Kind: storagetest.Status, Status: 503, RetryAfter: "1", Body: storagetest.SlowDownBody, Times: 4}}, storagetest.Status},
		{"500", []storagetest.ProxyFault{{Kind: storagetest.Status, Status: 500, Times: 3}}, storagetest.Status},
		{"429 on HEAD", []storagetest.ProxyFault{{Kind: storagetest.Status, Method: "HEAD", Status: 429, RetryAfter: "2", Times: 2}}, storagetest.Status},
		{"everything at once", []storagetest.ProxyFault{
			{Kind: storagetest.Status, Status: 503, RetryAfter: "1", Times: 2},
			{Kind: storagetest.Reset, Match: isGet, AfterBytes: 10_000, Times: 2},
			{Kind: storagetest.Truncate, Match: isGet, AfterBytes: 20_000, Times: 2},
			{Kind: storagetest.Stall, Match: longGet(30_000), AfterBytes: 30_000, Times: 1},
		}, storagetest.Stall},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var delays []time.Duration
			var mu sync.Mutex
			proxy, b, w := faultyStore(t, &retry.Options{
				StallTimeout: 50 * time.Millisecond,
				OnRetry:      func(e retry.Event) { mu.Lock(); delays = append(delays, e.Delay); mu.Unlock() },
			})
			storagetest.Put(t, w, "shard.mds", data)
			proxy.Inject(tt.faults...)
			dir := t.TempDir()
			dst := filepath.Join(dir, "shard.mds")
			n, err := storage.Download(t.Context(), b, "shard.mds", dst, &storage.DownloadOptions{PartSize: 1 << 20})
			if err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(dst)
			if n != int64(len(data)) || !bytes.Equal(got, data) {
				t.Errorf("downloaded %d bytes, not byte-exact", n)
			}
			if proxy.Injected(tt.kind) == 0 {
				t.Errorf("no %v fault was injected", tt.kind)
			}
			for _, f := range tt.faults {
				if f.RetryAfter != "" {
					want := time.Second
					if f.RetryAfter == "2" {
						want = 2 * time.Second
					}
					found := false
					for _, d := range delays {
						found = found || d >= want
					}
					if !found {
						t.Errorf("Retry-After %s not honoured: waits %v", f.RetryAfter, delays)
					}
				}
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 1 {
				t.Errorf("directory holds %d entries, want only the shard", len(entries))
			}
		})
	}
}

func TestDownloadFailsCleanlyAfterBudget(t *testing.T) {
	tests := []struct {
		name  string
		fault storagetest.ProxyFault
		want  string
	}{
		{"resets at first byte", storagetest.ProxyFault{Kind: storagetest.Reset, Method: "GET"}, "reset"},
		{"always 503", storagetest.ProxyFault{Kind: storagetest.Status, Status: 503, Body: storagetest.SlowDownBody}, "503"},
		{"403", storagetest.ProxyFault{Kind: storagetest.Status, Status: 403}, "403"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			proxy, b, w := faultyStore(t, &retry.Options{MaxAttempts: 4})
			storagetest.Put(t, w, "shard.mds", storagetest.Pattern(1, 200_000))
			proxy.Inject(tt.fault)
			dir := t.TempDir()
			dst := filepath.Join(dir, "shard.mds")
			_, err := storage.Download(t.Context(), b, "shard.mds", dst, &storage.DownloadOptions{Size: 200_000})
			if err == nil {
				t.Fatal("Download succeeded")
			}
			msg := err.Error()
			if !strings.Contains(msg, "/data/shard.mds") || !strings.Contains(msg, tt.want) {
				t.Errorf("error %q does not name the URL and %q", msg, tt.want)
			}
			var re *retry.Error
			if tt.want == "403" {
				if errors.As(err, &re) || !errors.Is(err, storage.ErrPermission) || proxy.Requests() != 1 {
					t.Errorf("403 was retried (%d requests) or misclassified: %v", proxy.Requests(), err)
				}
			} else if !errors.As(err, &re) || re.Attempts != 4 || !strings.Contains(msg, "get") {
				t.Errorf("error %v is not a retry.Error after 4 attempts", err)
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 0 {
				t.Errorf("failed download left %d files", len(entries))
			}
		})
	}
}

func FuzzParseContentRange(f *testing.F) {
	for _, s := range []string{"bytes 0-0/1", "bytes */100", "bytes 5-9/*", "bytes 9-5/10", "bytes 0-10/5", "bytes -1-2/3", "x", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		first, last, total, err := httpstore.ParseContentRange(v)
		if err != nil {
			return
		}
		if first == -1 {
			if last != -1 || total < 0 {
				t.Errorf("%q: unsatisfied form gave %d-%d/%d", v, first, last, total)
			}
			return
		}
		if first < 0 || last < first || (total >= 0 && last >= total) {
			t.Errorf("%q: accepted inconsistent range %d-%d/%d", v, first, last, total)
		}
	})
}

func BenchmarkHTTPStore(b *testing.B) {
	dir := b.TempDir()
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer srv.Close()
	hb, err := httpstore.New(srv.URL, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer hb.Close()
	w, err := filestore.New(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	storagetest.RunBenchmarksWith(b, hb, &storagetest.BenchOptions{Writer: w})
}
