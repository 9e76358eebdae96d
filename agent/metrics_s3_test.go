package agent

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicedata/sluice/agentapi"
	"github.com/sluicedata/sluice/internal/s3test"
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
	srv := s3test.Require(t)
	srv.SetCredentialEnv(t)
	prefix := s3test.NewPrefix("agent-metrics")
	const n = 200
	keys := uploadDataset(t, srv.Open(t, prefix), n) // the shards and index.json
	proxy, err := storagetest.NewFaultProxy(srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	shard := func(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, ".mds") }
	proxy.Inject(
		storagetest.ProxyFault{Kind: storagetest.Status, Method: "GET", Times: 2, Status: 503, Body: storagetest.SlowDownBody, Match: shard},
		storagetest.ProxyFault{Kind: storagetest.Reset, Method: "GET", Times: 1, AfterBytes: 100, Match: shard},
	)
	remote := srv.URL(proxy.URL, prefix)
	raw := &storage.Registry{}
	raw.Register("s3", s3store.Open)
	policy := &retry.Options{InitialBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond,
		ThrottleBackoff: 2 * time.Millisecond, MaxRetryAfter: 5 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := serveAgentWith(t, &Options{Registry: raw, Retry: policy, IdleTimeout: -1})()
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
	// Every request is timed, each attempt of a retried one too: the
	// index's GET, each shard's, the two answered 503 (errors) and the
	// one resuming the reset body (whose first GET answered and failed
	// while read: no error of its request).
	var gets agentapi.StoreOp
	for _, so := range m.Store {
		if so.Op == "get" {
			gets = so
		}
	}
	if want := int64(len(keys) + 3); gets.Requests != want || gets.Errors != 2 || gets.Seconds <= 0 {
		t.Errorf("store requests %+v, want %d GETs with 2 errors", m.Store, want)
	}
}
