package gcsstore_test

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/gcsstore"
	"github.com/sluicedata/sluice/storage/retry"
	"github.com/sluicedata/sluice/storage/storagetest"
)

// TestDownloadThroughFaults checks that the library's errors classify for
// the retry decorator: a download through resets, truncations and 503s
// completes byte-exact.
func TestDownloadThroughFaults(t *testing.T) {
	s := testServer(t)
	direct := newBucket(t, s)
	data := storagetest.Pattern(21, 2<<20+99)
	storagetest.Put(t, direct, "shard", data)

	retries := 0
	proxy, rb := proxiedBucket(t, s, direct, func(retry.Event) { retries++ })
	isGet := func(r *http.Request) bool { return r.Method == http.MethodGet }
	proxy.Inject(
		storagetest.ProxyFault{Kind: storagetest.Status, Status: 503, RetryAfter: "1", Times: 2},
		storagetest.ProxyFault{Kind: storagetest.Reset, Match: isGet, AfterBytes: 300_000, Times: 2},
		storagetest.ProxyFault{Kind: storagetest.Truncate, Match: isGet, AfterBytes: 50_000, Times: 1},
	)
	dir := t.TempDir()
	dst := filepath.Join(dir, "shard")
	if _, err := storage.Download(t.Context(), rb, "shard", dst, &storage.DownloadOptions{PartSize: 1 << 20, Concurrency: 1}); err != nil {
		t.Fatalf("Download: %v", err)
	}
	got, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("downloaded %d bytes, not byte-exact with the %d stored", len(got), len(data))
	}
	if retries == 0 || proxy.Injected(storagetest.Reset) == 0 {
		t.Errorf("retries %d, resets injected %d: the faults were not exercised", retries, proxy.Injected(storagetest.Reset))
	}
}

// proxiedBucket returns a fault proxy in front of the server and a Bucket
// on direct's root that reads through it, wrapped in the retry decorator
// (no real backoff waits; onRetry sees each retry). Both are closed when
// the test ends.
func proxiedBucket(t *testing.T, s server, direct *gcsstore.Bucket, onRetry func(retry.Event)) (*storagetest.FaultProxy, *retry.Bucket) {
	t.Helper()
	proxy, err := storagetest.NewFaultProxy(s.endpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	root := strings.TrimPrefix(direct.URL(""), "gs://"+s.bucket+"/")
	viaProxy, err := gcsstore.New(t.Context(), s.bucket, root, &gcsstore.Options{
		Endpoint: proxy.URL,
		// fake-gcs-server routes XML reads by the Host header, which the
		// proxy passes through unchanged; JSON reads name the bucket in
		// the path.
		JSONReads: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	rb, err := retry.New(viaProxy, &retry.Options{
		InitialBackoff: time.Millisecond,
		StallTimeout:   250 * time.Millisecond,
		Sleep:          func(ctx context.Context, _ time.Duration) error { return ctx.Err() },
		OnRetry:        onRetry,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rb.Close() })
	return proxy, rb
}
