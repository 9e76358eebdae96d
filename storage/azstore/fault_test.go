package azstore_test

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/azstore"
	"github.com/sluicedata/sluice/storage/retry"
	"github.com/sluicedata/sluice/storage/storagetest"
)

// TestDownloadThroughFaults checks that the SDK's errors classify for
// the retry decorator: a download through resets, truncations and 503s
// completes byte-exact.
func TestDownloadThroughFaults(t *testing.T) {
	s := testServer(t)
	direct := newBucket(t, s)
	data := storagetest.Pattern(21, 2<<20+99)
	storagetest.Put(t, direct, "shard", data)

	// The proxy stands in for the blob endpoint; shared-key signatures
	// cover the path, not the host, so they stay valid.
	endpoint, err := url.Parse(connField(s.connStr, "BlobEndpoint"))
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := storagetest.NewFaultProxy(endpoint.Scheme + "://" + endpoint.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	connStr := strings.Replace(s.connStr, endpoint.Scheme+"://"+endpoint.Host, proxy.URL, 1)
	root := strings.TrimPrefix(direct.URL(""), "az://"+s.container+"/")
	viaProxy, err := azstore.New(t.Context(), s.container, root, &azstore.Options{ConnectionString: connStr})
	if err != nil {
		t.Fatal(err)
	}
	retries := 0
	rb, err := retry.New(viaProxy, &retry.Options{
		InitialBackoff: time.Millisecond,
		StallTimeout:   250 * time.Millisecond,
		Sleep:          func(ctx context.Context, _ time.Duration) error { return ctx.Err() },
		OnRetry:        func(retry.Event) { retries++ },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer rb.Close()
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
