package stream_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/internal/stores"
	"github.com/sluicedata/sluice/plan"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/retry"
	"github.com/sluicedata/sluice/storage/storagetest"
	"github.com/sluicedata/sluice/stream"
)

// fastRetry is a retry policy with short waits, for tests.
func fastRetry() *retry.Options {
	return &retry.Options{
		MaxAttempts: 8, InitialBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond,
		ThrottleBackoff: 5 * time.Millisecond, MaxRetryAfter: 10 * time.Millisecond,
		AttemptTimeout: 5 * time.Second, StallTimeout: 200 * time.Millisecond,
	}
}

// faultyDataset is memDataset behind a storagetest.Faulty, reachable as
// mem://data through a Registry whose opener does not decorate (as a
// library user's own might).
func faultyDataset(t *testing.T, s spec) (*storage.Registry, *storagetest.Faulty) {
	t.Helper()
	_, cb := memDataset(t, s)
	f := storagetest.NewFaulty(cb)
	r := &storage.Registry{}
	r.Register("mem", func(context.Context, *url.URL) (storage.Bucket, error) { return f, nil })
	return r, f
}

// readAll reads one epoch of ds as one rank and returns the ids seen.
func readAll(t *testing.T, ctx context.Context, ds *stream.Dataset) map[int64]int {
	t.Helper()
	ep, err := ds.NewEpoch(ctx, plan.World{Nodes: 1, RanksPerNode: 1}, 1)
	if err != nil {
		t.Fatal(err)
	}
	it, err := ep.RankIter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	seen := map[int64]int{}
	for it.Next() {
		seen[recordID(it.Record())]++
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return seen
}

func checkOnce(t *testing.T, seen map[int64]int, n int) {
	t.Helper()
	if len(seen) != n {
		t.Fatalf("%d distinct samples, want %d", len(seen), n)
	}
	for id, c := range seen {
		if c != 1 || id < 0 || id >= int64(n) {
			t.Fatalf("sample %d seen %d times", id, c)
		}
	}
}

// TestOpenRetriesIndexAndShards: stream.Open gets the retry decorator
// even from a Registry that does not decorate: index.json survives
// resets before and during its body, shards survive resets, truncated
// bodies and stalls mid-body (resumed from the byte reached).
func TestOpenRetriesIndexAndShards(t *testing.T) {
	ctx := context.Background()
	reg, f := faultyDataset(t, spec{samples: 200, payload: 100, sizeLimit: 3000})
	reset := syscall.ECONNRESET
	f.Inject(
		storagetest.Fault{Op: storagetest.OpOpen, Key: format.IndexFile, Times: 3, Err: reset},
		storagetest.Fault{Op: storagetest.OpRead, Key: format.IndexFile, Times: 2, AfterBytes: 10, Err: reset},
		storagetest.Fault{Op: storagetest.OpOpen, Key: "shard.", Every: 2, Times: 6, Err: &storage.HTTPError{Op: "get", StatusCode: 503, Code: "SlowDown"}},
		storagetest.Fault{Op: storagetest.OpRead, Key: "shard.00001", Times: 1, AfterBytes: 100, Err: reset},
		storagetest.Fault{Op: storagetest.OpRead, Key: "shard.00002", Times: 1, AfterBytes: 100, Stall: true},
		storagetest.Fault{Op: storagetest.OpRead, Key: "shard.00003", Times: 1, AfterBytes: 100, Err: errors.New("unexpected EOF")},
	)
	ds, err := stream.Open(ctx, &stream.Options{Remote: "mem://data", Local: t.TempDir(), Registry: reg, Retry: fastRetry(), DownloadRetry: 1, BatchSize: 4})
	if err != nil {
		t.Fatalf("Open with faults on index.json: %v", err)
	}
	defer ds.Close()
	checkOnce(t, readAll(t, ctx, ds), 200)
}

// TestSizeMismatchIsCorruptNotRetried: a shard shorter in the store than
// in the index fails at once, naming the file, with no second request.
func TestSizeMismatchIsCorruptNotRetried(t *testing.T) {
	ctx := context.Background()
	reg, f := faultyDataset(t, spec{samples: 50, payload: 100, sizeLimit: 2000})
	f.Inject(storagetest.Fault{Op: storagetest.OpRead, Key: "shard.00000.mds", AfterBytes: 64, Truncate: true})
	ds, err := stream.Open(ctx, &stream.Options{Remote: "mem://data", Local: t.TempDir(), Registry: reg, Retry: fastRetry(), DownloadRetry: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	before := f.Calls(storagetest.OpOpen)
	_, err = ds.Get(ctx, 0)
	if !errors.Is(err, format.ErrCorrupt) || !strings.Contains(err.Error(), "shard.00000.mds") {
		t.Fatalf("Get on a short shard = %v, want a corruption error naming shard.00000.mds", err)
	}
	if n := f.Calls(storagetest.OpOpen) - before; n != 1 {
		t.Errorf("a size mismatch was requested %d times, want once (it is corruption, not a transient fault)", n)
	}
}

// TestBudgetSpentNamesEverything: at 100% faults the run fails within the
// retry budget, the error naming URL, operation, attempts and last cause.
func TestBudgetSpentNamesEverything(t *testing.T) {
	ctx := context.Background()
	reg, f := faultyDataset(t, spec{samples: 50, payload: 100, sizeLimit: 2000})
	ds, err := stream.Open(ctx, &stream.Options{Remote: "mem://data", Local: t.TempDir(), Registry: reg, Retry: fastRetry(), DownloadRetry: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	f.Inject(storagetest.Fault{Op: storagetest.OpOpen, Key: "shard.", Err: syscall.ECONNRESET})
	before := f.Calls(storagetest.OpOpen)
	_, err = ds.Get(ctx, 0)
	var re *retry.Error
	if !errors.As(err, &re) {
		t.Fatalf("Get at 100%% faults = %v, want a *retry.Error", err)
	}
	if re.Op != "get" || re.Attempts != 8 || !strings.Contains(re.URL, "shard.00000.mds") || !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("error %v: op %q, attempts %d, url %q", err, re.Op, re.Attempts, re.URL)
	}
	for _, want := range []string{"get", "shard.00000.mds", "8 attempts", "connection reset"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if n := f.Calls(storagetest.OpOpen) - before; n != 8 {
		t.Errorf("%d requests, want the budget of 8 (the cache does not multiply it)", n)
	}
}

// silentServer accepts connections and never answers.
func silentServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		close(done)
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// TestNeverAnsweringServer: a server that accepts and never answers does
// not hang Open: every request has a deadline (the download timeout per
// attempt), for http and s3 alike.
func TestNeverAnsweringServer(t *testing.T) {
	addr := silentServer(t)
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	for _, remote := range []string{
		"http://" + addr + "/data",
		"s3://bucket/data?endpoint=" + url.QueryEscape("http://user:hunter2@"+addr),
	} {
		t.Run(strings.SplitN(remote, ":", 2)[0], func(t *testing.T) {
			// The test's own deadline is far beyond the one under test.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			r := fastRetry()
			r.MaxAttempts = 2
			r.AttemptTimeout = 0 // the download timeout applies
			_, err := stream.Open(ctx, &stream.Options{Remote: remote, Local: t.TempDir(), Registry: stores.Default(),
				Retry: r, DownloadTimeout: 200 * time.Millisecond})
			var re *retry.Error
			if !errors.As(err, &re) || ctx.Err() != nil {
				t.Fatalf("Open against a silent server = %v, want a *retry.Error before the test's deadline", err)
			}
			if !strings.Contains(err.Error(), "attempt timed out") || !strings.Contains(err.Error(), "index.json") {
				t.Errorf("error %q does not say which wait timed out", err)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error %q shows the endpoint's password", err)
			}
		})
	}
}

// TestHTMLIndex: a proxy or captive portal answering index.json with an
// HTML page (status 200) is reported as such.
func TestHTMLIndex(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "\n<!DOCTYPE html>\n<html><head><title>Sign in</title></head><body>Welcome to the hotel wifi</body></html>\n")
	}))
	defer srv.Close()
	_, err := stream.Open(context.Background(), &stream.Options{Remote: srv.URL + "/data", Local: t.TempDir(),
		Registry: stores.Default(), Retry: fastRetry()})
	if !errors.Is(err, stream.ErrHTML) || !strings.Contains(err.Error(), "the server returned HTML") {
		t.Fatalf("Open on an HTML index.json = %v, want ErrHTML", err)
	}
}

// TestRemoteIndexChanged: a dataset replaced in the store after its index
// was cached is noticed at the next Open (one Stat), which fails with
// ErrIndexChanged naming the cached copy instead of serving the old data.
func TestRemoteIndexChanged(t *testing.T) {
	ctx := context.Background()
	reg, cb := memDataset(t, spec{samples: 50, payload: 100, sizeLimit: 2000})
	local := t.TempDir()
	open := func() (*stream.Dataset, error) {
		return stream.Open(ctx, &stream.Options{Remote: "mem://data", Local: local, Registry: reg, Retry: fastRetry()})
	}
	ds, err := open()
	if err != nil {
		t.Fatal(err)
	}
	ds.Close()
	// Unchanged: the cached copy is used again.
	ds, err = open()
	if err != nil {
		t.Fatalf("reopen of an unchanged remote: %v", err)
	}
	ds.Close()
	if n := cb.counts()[format.IndexFile]; n != 1 {
		t.Errorf("index.json downloaded %d times, want once", n)
	}
	// Replace the dataset in the store with a bigger one.
	dir := t.TempDir()
	writeDataset(t, dir, spec{samples: 80, payload: 100, sizeLimit: 2000})
	b, err := os.ReadFile(filepath.Join(dir, format.IndexFile))
	if err != nil {
		t.Fatal(err)
	}
	storagetest.Put(t, cb.Bucket, format.IndexFile, b)
	_, err = open()
	if !errors.Is(err, stream.ErrIndexChanged) || !strings.Contains(err.Error(), local) {
		t.Fatalf("Open after the remote changed = %v, want ErrIndexChanged naming the cache", err)
	}
}
