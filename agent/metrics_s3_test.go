package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicedata/sluice/agentapi"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/retry"
	"github.com/sluicedata/sluice/storage/s3store"
	"github.com/sluicedata/sluice/storage/storagetest"
)

// TestMetricsCountS3Retries: the agent reads a dataset from the real S3
// server through the fault proxy, which answers two shard GETs with a 503
// SlowDown and resets one body: the metrics request counts exactly those
// retries (get/throttled 2, get/other 1) and every sample arrives.
func TestMetricsCountS3Retries(t *testing.T) {
	endpoint, bucket := os.Getenv("SLUICE_TEST_S3_ENDPOINT"), os.Getenv("SLUICE_TEST_S3_BUCKET")
	if endpoint == "" || bucket == "" {
		if os.Getenv("SLUICE_REQUIRE_SERVICES") == "1" {
			t.Fatal("SLUICE_TEST_S3_ENDPOINT is not set under CI")
		}
		t.Skip("SLUICE_TEST_S3_ENDPOINT not set; run under .ci/with-services.sh")
	}
	region := os.Getenv("SLUICE_TEST_S3_REGION")
	if region == "" {
		region = "us-east-1"
	}
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_ACCESS_KEY_ID", os.Getenv("SLUICE_TEST_S3_ACCESS_KEY"))
	t.Setenv("AWS_SECRET_ACCESS_KEY", os.Getenv("SLUICE_TEST_S3_SECRET_KEY"))
	var rb [6]byte
	rand.Read(rb[:])
	prefix := "test/agent-metrics-" + hex.EncodeToString(rb[:])
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	direct, err := s3store.New(ctx, bucket, prefix, &s3store.Options{Endpoint: endpoint, Region: region})
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	src := t.TempDir()
	const n = 200
	writeDataset(t, src, n, 1<<10)
	ents, _ := os.ReadDir(src)
	for _, e := range ents {
		if err := storage.UploadFile(ctx, direct, e.Name(), filepath.Join(src, e.Name()), nil); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, e := range ents {
			direct.Delete(context.Background(), e.Name())
		}
	})
	proxy, err := storagetest.NewFaultProxy(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	shard := func(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, ".mds") }
	proxy.Inject(
		storagetest.ProxyFault{Kind: storagetest.Status, Method: "GET", Times: 2, Status: 503, Body: storagetest.SlowDownBody, Match: shard},
		storagetest.ProxyFault{Kind: storagetest.Reset, Method: "GET", Times: 1, AfterBytes: 100, Match: shard},
	)
	q := url.Values{"endpoint": {proxy.URL}, "region": {region}}
	remote := "s3://" + bucket + "/" + prefix + "?" + q.Encode()
	raw := &storage.Registry{}
	raw.Register("s3", s3store.Open)
	policy := &retry.Options{InitialBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond,
		ThrottleBackoff: 2 * time.Millisecond, MaxRetryAfter: 5 * time.Millisecond}
	a, err := New(&Options{Registry: raw, Retry: policy, IdleTimeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	adir := t.TempDir()
	lock, err := AcquireLock(filepath.Join(adir, "agent"))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := lock.Listen()
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Serve(sctx, ln) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		lock.Release()
	}()
	c, err := agentapi.Dial(ctx, SocketPath(filepath.Join(adir, "agent")), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	world := agentapi.World{WorldSize: 1, LocalWorldSize: 1}
	op, err := c.Open(ctx, agentapi.Open{Dataset: agentapi.Dataset{Remote: remote, Local: filepath.Join(t.TempDir(), "cache"), BatchSize: 4},
		Job: "metrics", World: world})
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Begin(ctx, agentapi.Begin{Handle: op.Handle, World: world})
	if err != nil {
		t.Fatal(err)
	}
	if ids := drain(t, c, b.Iter, 0); len(ids) != n {
		t.Fatalf("%d samples, want %d", len(ids), n)
	}
	m, err := c.Metrics(ctx, agentapi.MetricsQuery{Handle: op.Handle})
	if err != nil {
		t.Fatal(err)
	}
	want := []agentapi.RetryCount{{Op: "get", Cause: "other", N: 1}, {Op: "get", Cause: "throttled", N: 2}}
	if diff := cmp.Diff(want, m.RetriesBy); diff != "" || m.StoreRetries != 3 {
		t.Errorf("retries %d (-want +got):\n%s", m.StoreRetries, diff)
	}
	if m.Samples != n || m.BytesFetched <= 0 {
		t.Errorf("metrics %+v: want %d samples and bytes fetched", m, n)
	}
	if k := proxy.Injected(storagetest.Status) + proxy.Injected(storagetest.Reset); k != 3 {
		t.Errorf("the proxy injected %d faults, want 3", k)
	}
}
