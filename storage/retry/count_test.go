package retry_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicedata/sluice/storage/httpstore"
	"github.com/sluicedata/sluice/storage/retry"
	"github.com/sluicedata/sluice/storage/storagetest"
)

// TestCountsThroughFaultProxy: a real HTTP server behind the fault proxy
// fails reads with a 503 SlowDown twice, a 500 once, a reset body once and
// a stalled body once; Counts hooked onto the policy counts exactly those
// retries by cause, and the data still arrives whole.
func TestCountsThroughFaultProxy(t *testing.T) {
	dir := t.TempDir()
	data := bytes.Repeat([]byte("sluice-retries "), 4096)
	if err := os.WriteFile(filepath.Join(dir, "obj"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer srv.Close()
	proxy, err := storagetest.NewFaultProxy(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	hb, err := httpstore.New(proxy.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	var counts retry.Counts
	var seen []string
	o := counts.Hook(&retry.Options{
		Sleep:        func(ctx context.Context, _ time.Duration) error { return ctx.Err() },
		StallTimeout: 100 * time.Millisecond, AttemptTimeout: 10 * time.Second,
		OnRetry: func(ev retry.Event) { seen = append(seen, ev.Cause) },
	})
	b, err := retry.New(hb, o)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	proxy.Inject(
		storagetest.ProxyFault{Kind: storagetest.Status, Method: "GET", Times: 2, Status: 503, Body: storagetest.SlowDownBody},
		storagetest.ProxyFault{Kind: storagetest.Status, Method: "GET", Times: 1, Status: 500},
		storagetest.ProxyFault{Kind: storagetest.Reset, Method: "GET", Times: 1, AfterBytes: 1000},
		storagetest.ProxyFault{Kind: storagetest.Stall, Method: "GET", Times: 1, AfterBytes: 2000},
	)
	r, err := b.NewRangeReader(context.Background(), "obj", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	r.Close()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes, want the %d written", len(got), len(data))
	}
	want := []retry.Count{
		{Op: "get", Cause: retry.CauseOther, N: 1},
		{Op: "get", Cause: retry.CauseServer, N: 1},
		{Op: "get", Cause: retry.CauseStall, N: 1},
		{Op: "get", Cause: retry.CauseThrottled, N: 2},
	}
	if diff := cmp.Diff(want, counts.Snapshot()); diff != "" {
		t.Errorf("counts (-want +got):\n%s\nevents: %v", diff, seen)
	}
	if n := counts.Total(); n != 5 {
		t.Errorf("Total() = %d, want 5", n)
	}
	if len(seen) != 5 {
		t.Errorf("the policy's own OnRetry saw %d retries, want 5 (Hook must call it)", len(seen))
	}
}

// TestCauseClassifies: the classifier's answers for the errors a store
// gives.
func TestCauseClassifies(t *testing.T) {
	var c retry.Counts
	c.Observe(retry.Event{Op: "stat", Err: io.ErrUnexpectedEOF})
	c.Observe(retry.Event{Op: "stat", Cause: retry.CauseTimeout})
	want := []retry.Count{{Op: "stat", Cause: retry.CauseOther, N: 1}, {Op: "stat", Cause: retry.CauseTimeout, N: 1}}
	if diff := cmp.Diff(want, c.Snapshot()); diff != "" {
		t.Errorf("counts (-want +got):\n%s", diff)
	}
}
