package storagetest_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/memstore"
	"github.com/sluicedata/sluice/storage/storagetest"
)

func TestFaulty(t *testing.T) {
	m := memstore.New("b")
	storagetest.Put(t, m, "a/1", []byte("0123456789"))
	storagetest.Put(t, m, "b/1", []byte("x"))
	f := storagetest.NewFaulty(m)
	boom := errors.New("boom")
	f.Inject(
		storagetest.Fault{Op: storagetest.OpStat, Key: "a/", Times: 2, Err: boom},
		storagetest.Fault{Op: storagetest.OpOpen, Every: 2, Err: boom},
		storagetest.Fault{Op: storagetest.OpRead, Key: "a/", AfterBytes: 4, Truncate: true, Times: 1},
	)
	ctx := t.Context()
	for i, want := range []bool{true, true, false} {
		if _, err := f.Stat(ctx, "a/1"); errors.Is(err, boom) != want {
			t.Errorf("Stat #%d = %v", i+1, err)
		}
	}
	if _, err := f.Stat(ctx, "b/1"); err != nil {
		t.Errorf("Stat outside the key prefix = %v", err)
	}
	// Opens alternate: ok, fail, ok, fail.
	var got []string
	for range 4 {
		r, err := f.NewRangeReader(ctx, "a/1", 0, -1)
		if err != nil {
			got = append(got, "fail")
			continue
		}
		data, _ := io.ReadAll(r)
		r.Close()
		got = append(got, string(data))
	}
	if want := []string{"0123", "fail", "0123456789", "fail"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("reads = %v, want %v", got, want)
	}
	if f.Calls(storagetest.OpOpen) != 4 || f.Calls(storagetest.OpStat) != 4 {
		t.Errorf("calls: open %d, stat %d", f.Calls(storagetest.OpOpen), f.Calls(storagetest.OpStat))
	}
	f.Clear()
	if _, err := f.NewRangeReader(ctx, "a/1", 0, -1); err != nil {
		t.Errorf("after Clear: %v", err)
	}
}

func TestFaultyStallEndsWithContext(t *testing.T) {
	m := memstore.New("b")
	storagetest.Put(t, m, "k", []byte("0123456789"))
	f := storagetest.NewFaulty(m)
	f.Inject(storagetest.Fault{Op: storagetest.OpRead, AfterBytes: 3, Stall: true})
	ctx, cancel := context.WithCancel(t.Context())
	r, err := f.NewRangeReader(ctx, "k", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	buf := make([]byte, 3)
	if _, err := io.ReadFull(r, buf); err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() {
		_, err := r.Read(buf)
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("stalled read ended with %v", err)
	}
}

func TestFaultyWriteLeavesNothing(t *testing.T) {
	m := memstore.New("b")
	f := storagetest.NewFaulty(m)
	f.Inject(storagetest.Fault{Op: storagetest.OpWrite, Times: 1, Err: errors.New("lost")})
	if _, err := storage.WriteFrom(t.Context(), f, "k", strings.NewReader("data"), nil); err == nil {
		t.Fatal("faulted write succeeded")
	}
	if ok, _ := storage.Exists(t.Context(), m, "k"); ok {
		t.Error("faulted write is visible")
	}
	storagetest.Put(t, f, "k", []byte("data"))
}

// origin serves a fixed body and records the Host header it sees.
type origin struct {
	body  []byte
	mu    sync.Mutex
	hosts []string
}

func (o *origin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	o.mu.Lock()
	o.hosts = append(o.hosts, r.Host)
	o.mu.Unlock()
	w.Header().Set("Content-Length", "100000")
	w.Write(o.body)
}

func newProxy(t *testing.T) (*storagetest.FaultProxy, *origin) {
	t.Helper()
	o := &origin{body: storagetest.Pattern(1, 100_000)}
	srv := httptest.NewServer(o)
	t.Cleanup(srv.Close)
	p, err := storagetest.NewFaultProxy(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p, o
}

func get(ctx context.Context, url string) (*http.Response, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	return http.DefaultClient.Do(req)
}

func TestFaultProxyStatus(t *testing.T) {
	p, o := newProxy(t)
	p.Inject(storagetest.ProxyFault{Kind: storagetest.Status, Status: 503, RetryAfter: "5", Body: storagetest.SlowDownBody, Times: 1},
		storagetest.ProxyFault{Kind: storagetest.Status, Method: "PUT", Status: 429})
	resp, err := get(t.Context(), p.URL+"/k")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "5" || !bytes.Contains(body, []byte("SlowDown")) {
		t.Errorf("got %d, Retry-After %q, body %q", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	resp, err = get(t.Context(), p.URL+"/k")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Equal(body, o.body) {
		t.Errorf("second request: %d, %d bytes", resp.StatusCode, len(body))
	}
	host := strings.TrimPrefix(p.URL, "http://")
	if len(o.hosts) != 1 || o.hosts[0] != host {
		t.Errorf("origin saw Host %v, want the proxy's %q", o.hosts, host)
	}
	if p.Requests() != 2 || p.Injected(storagetest.Status) != 1 {
		t.Errorf("requests %d, injected %d", p.Requests(), p.Injected(storagetest.Status))
	}
}

func TestFaultProxyBrokenBodies(t *testing.T) {
	for _, kind := range []storagetest.ProxyFaultKind{storagetest.Reset, storagetest.Truncate} {
		t.Run(kind.String(), func(t *testing.T) {
			p, o := newProxy(t)
			p.Inject(storagetest.ProxyFault{Kind: kind, AfterBytes: 1000, Times: 1})
			resp, err := get(t.Context(), p.URL+"/k")
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err == nil || !bytes.Equal(body, o.body[:1000]) {
				t.Errorf("read %d bytes, err %v; want the first 1000 and an error", len(body), err)
			}
			if kind == storagetest.Truncate && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("truncated body ended with %v, want io.ErrUnexpectedEOF", err)
			}
			if !storage.IsRetryable(err) {
				t.Errorf("%v is not retryable", err)
			}
		})
	}
}

func TestFaultProxyStall(t *testing.T) {
	p, o := newProxy(t)
	p.Inject(storagetest.ProxyFault{Kind: storagetest.Stall, AfterBytes: 1000})
	ctx, cancel := context.WithCancel(t.Context())
	resp, err := get(ctx, p.URL+"/k")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 1000)
	if _, err := io.ReadFull(resp.Body, buf); err != nil || !bytes.Equal(buf, o.body[:1000]) {
		t.Fatalf("first bytes: %v", err)
	}
	done := make(chan error)
	go func() {
		_, err := resp.Body.Read(buf)
		done <- err
	}()
	cancel()
	if err := <-done; err == nil {
		t.Error("stalled body delivered data")
	}
}

func TestNewFaultProxyRejectsBadTarget(t *testing.T) {
	for _, target := range []string{"ftp://x", "::"} {
		if p, err := storagetest.NewFaultProxy(target); err == nil {
			p.Close()
			t.Errorf("NewFaultProxy(%q) succeeded", target)
		}
	}
}

// TestConformance runs the suite on its own reference bucket and on Faulty
// with no faults, which must be transparent.
func TestConformance(t *testing.T) {
	t.Run("memstore", func(t *testing.T) {
		storagetest.Run(t, func(t *testing.T) storage.Bucket { return memstore.New("m") })
	})
	t.Run("Faulty", func(t *testing.T) {
		storagetest.Run(t, func(t *testing.T) storage.Bucket { return storagetest.NewFaulty(memstore.New("f")) })
	})
}
