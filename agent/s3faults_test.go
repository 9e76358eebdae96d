package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sluicedata/sluice/agentapi"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/retry"
	"github.com/sluicedata/sluice/storage/s3store"
	"github.com/sluicedata/sluice/storage/storagetest"
)

// TestAgentThroughS3Faults: the agent path (stream.Open inside the agent,
// over a Registry whose s3 opener does not decorate) against the real S3
// server through a proxy failing 1%, 10% and 30% of requests with each
// kind of fault: every epoch delivers every sample exactly once.
func TestAgentThroughS3Faults(t *testing.T) {
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
	prefix := "test/agent-faults-" + hex.EncodeToString(rb[:])
	ctx := context.Background()
	direct, err := s3store.New(ctx, bucket, prefix, &s3store.Options{Endpoint: endpoint, Region: region})
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	src := t.TempDir()
	const n = 400
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
	q := url.Values{"endpoint": {proxy.URL}, "region": {region}}
	remote := "s3://" + bucket + "/" + prefix + "?" + q.Encode()

	raw := &storage.Registry{}
	raw.Register("s3", s3store.Open)
	policy := &retry.Options{MaxAttempts: 16, InitialBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond,
		ThrottleBackoff: 5 * time.Millisecond, MaxRetryAfter: 20 * time.Millisecond, StallTimeout: 150 * time.Millisecond}
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
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Serve(sctx, ln) }()
	defer func() {
		cancel()
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

	get := func(m func(*http.Request) bool) func(*http.Request) bool {
		return func(r *http.Request) bool { return r.Method == http.MethodGet && m(r) }
	}
	for i, rate := range []float64{0.01, 0.10, 0.30} {
		proxy.Clear()
		seed := uint64(10 * i)
		proxy.Inject(
			storagetest.ProxyFault{Kind: storagetest.Status, Status: 503, Body: storagetest.SlowDownBody, Match: storagetest.Rate(rate, seed)},
			storagetest.ProxyFault{Kind: storagetest.Reset, AfterBytes: 100, Match: get(storagetest.Rate(rate, seed+1))},
			storagetest.ProxyFault{Kind: storagetest.Truncate, AfterBytes: 100, Match: get(storagetest.Rate(rate, seed+2))},
			storagetest.ProxyFault{Kind: storagetest.Stall, AfterBytes: 100, Match: get(storagetest.Rate(rate, seed+3))},
		)
		ds := agentapi.Dataset{Remote: remote, Local: filepath.Join(t.TempDir(), "cache"), BatchSize: 4, Shuffle: true, NumCanonicalNodes: 2}
		world := agentapi.World{WorldSize: 1, LocalWorldSize: 1}
		op, err := c.Open(ctx, agentapi.Open{Dataset: ds, Job: "faults", World: world})
		if err != nil {
			t.Fatalf("rate %.0f%%: open: %v", rate*100, err)
		}
		b, err := c.Begin(ctx, agentapi.Begin{Handle: op.Handle, World: world})
		if err != nil {
			t.Fatalf("rate %.0f%%: begin: %v", rate*100, err)
		}
		ids := drain(t, c, b.Iter, 0)
		slices.Sort(ids)
		if len(ids) != n {
			t.Fatalf("rate %.0f%%: %d samples, want %d", rate*100, len(ids), n)
		}
		for j, id := range ids {
			if id != int64(j) {
				t.Fatalf("rate %.0f%%: sample %d missing or repeated", rate*100, j)
			}
		}
	}
	if k := proxy.Injected(storagetest.Status) + proxy.Injected(storagetest.Reset) + proxy.Injected(storagetest.Stall); k == 0 {
		t.Errorf("no fault injected in %d requests", proxy.Requests())
	}
}
