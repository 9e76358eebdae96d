package cli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicedata/sluice/storage/storagetest"
)

// TestStreamJSONCountsRetries: `sluice stream --json` over a real HTTP
// server behind the fault proxy, which fails three shard downloads with a
// 503 SlowDown and resets one body: the report counts exactly those
// retries by cause, and every sample arrives.
func TestStreamJSONCountsRetries(t *testing.T) {
	dir := t.TempDir()
	remote := filepath.Join(dir, "remote")
	writeStreamDataset(t, remote, 200, "")
	srv := httptest.NewServer(http.FileServer(http.Dir(remote)))
	defer srv.Close()
	proxy, err := storagetest.NewFaultProxy(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	shard := func(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, ".mds") }
	proxy.Inject(
		storagetest.ProxyFault{Kind: storagetest.Status, Method: "GET", Times: 3, Status: 503, Body: storagetest.SlowDownBody, Match: shard},
		storagetest.ProxyFault{Kind: storagetest.Reset, Method: "GET", Times: 1, AfterBytes: 100, Match: shard},
	)
	out, err := streamRunCLI(t, "stream", proxy.URL, "--local", filepath.Join(dir, "cache"), "--batch-size", "4",
		"--retry-backoff", "1ms", "--retry-max-backoff", "5ms", "--retry-throttle-backoff", "2ms", "--json")
	if err != nil {
		t.Fatalf("stream: %v\n%s", err, out)
	}
	var r streamReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if r.Samples != 200 {
		t.Errorf("streamed %d samples, want 200", r.Samples)
	}
	want := []retryCount{{Op: "get", Cause: "other", N: 1}, {Op: "get", Cause: "throttled", N: 3}}
	if diff := cmp.Diff(want, r.RetriesBy); diff != "" || r.StoreRetries != 4 {
		t.Errorf("store_retries %d, retries_by (-want +got):\n%s\n%s", r.StoreRetries, diff, out)
	}
	if n := proxy.Injected(storagetest.Status) + proxy.Injected(storagetest.Reset); n != 4 {
		t.Errorf("the proxy injected %d faults, want 4", n)
	}
}
