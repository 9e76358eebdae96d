package agent

import (
	"context"
	"net/http"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sluicedata/sluice/agentapi"
	"github.com/sluicedata/sluice/internal/s3test"
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
	srv := s3test.Require(t)
	srv.SetCredentialEnv(t)
	prefix := s3test.NewPrefix("agent-faults")
	const n = 400
	uploadDataset(t, srv.Open(t, prefix), n)
	proxy, err := storagetest.NewFaultProxy(srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	remote := srv.URL(proxy.URL, prefix)

	raw := &storage.Registry{}
	raw.Register("s3", s3store.Open)
	policy := &retry.Options{MaxAttempts: 16, InitialBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond,
		ThrottleBackoff: 5 * time.Millisecond, MaxRetryAfter: 20 * time.Millisecond, StallTimeout: 150 * time.Millisecond}
	ctx := context.Background()
	c := serveAgentWith(t, &Options{Registry: raw, Retry: policy, IdleTimeout: -1})()

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
