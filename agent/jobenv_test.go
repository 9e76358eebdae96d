package agent

import (
	"context"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sluicedata/sluice/agentapi"
	"github.com/sluicedata/sluice/internal/s3test"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/s3store"
	"github.com/sluicedata/sluice/storage/storagetest"
)

// TestJobsDownloadThroughTheirOwnStore: two jobs with different S3
// settings share one cache directory. The first registers it (opens the
// dataset, reads nothing); every shard the second then reads is
// downloaded through the second job's own endpoint (a counting proxy in
// front of the real server), not through the first job's store; a third
// job with wrong keys is refused on the directory both have cached.
func TestJobsDownloadThroughTheirOwnStore(t *testing.T) {
	srv := s3test.Require(t)
	endpoint, bucket, region := srv.Endpoint, srv.Bucket, srv.Region
	key, secret := srv.AccessKey, srv.SecretKey
	prefix := s3test.NewPrefix("agent-jobenv")
	ctx := context.Background()
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	// The fixture is uploaded with the server's keys given explicitly: CI
	// exports only SLUICE_TEST_S3_*, not the AWS variables.
	const n = 300
	shards := 0
	for _, name := range uploadDataset(t, srv.Open(t, prefix), n) {
		if strings.HasPrefix(name, "shard.") {
			shards++
		}
	}
	proxy, err := storagetest.NewFaultProxy(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	var shardGets atomic.Int64
	proxy.Inject(storagetest.ProxyFault{Kind: storagetest.Status, Status: 500, Match: func(r *http.Request) bool {
		if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/shard.") {
			shardGets.Add(1)
		}
		return false // count only
	}})

	raw := &storage.Registry{}
	raw.Register("s3", s3store.Open)
	dial := serveAgentWith(t, &Options{Registry: raw, IdleTimeout: -1})
	env := func(ep, secret string) map[string]string {
		return map[string]string{"S3_ENDPOINT_URL": ep, "AWS_REGION": region,
			"AWS_ACCESS_KEY_ID": key, "AWS_SECRET_ACCESS_KEY": secret, "AWS_EC2_METADATA_DISABLED": "true"}
	}
	ds := agentapi.Dataset{Remote: "s3://" + bucket + "/" + prefix, Local: filepath.Join(t.TempDir(), "cache"), BatchSize: 4}
	world := agentapi.World{WorldSize: 1, LocalWorldSize: 1}

	// Job A registers the directory with its store and reads nothing.
	ca := dial()
	if _, err := ca.Open(ctx, agentapi.Open{Dataset: ds, Job: "a", World: world, Env: env(endpoint, secret)}); err != nil {
		t.Fatalf("job a: open: %v", err)
	}
	// Job B, through its own endpoint, reads every sample.
	cb := dial()
	op, err := cb.Open(ctx, agentapi.Open{Dataset: ds, Job: "b", World: world, Env: env(proxy.URL, secret)})
	if err != nil {
		t.Fatalf("job b: open: %v", err)
	}
	b, err := cb.Begin(ctx, agentapi.Begin{Handle: op.Handle, World: world})
	if err != nil {
		t.Fatalf("job b: begin: %v", err)
	}
	ids := drain(t, cb, b.Iter, 0)
	slices.Sort(ids)
	if len(ids) != n || ids[0] != 0 || ids[n-1] != n-1 {
		t.Fatalf("job b: %d samples, want %d distinct", len(ids), n)
	}
	if got := shardGets.Load(); got < int64(shards) {
		t.Errorf("job b's endpoint saw %d shard downloads of %d shards: its shards were downloaded through job a's store", got, shards)
	}

	// Job C, wrong keys, on the directory A and B cached: refused.
	cc := dial()
	if _, err := cc.Open(ctx, agentapi.Open{Dataset: ds, Job: "c", World: world, Env: env(endpoint, "not-the-secret")}); err == nil {
		t.Fatal("job c, with wrong keys, opened the dataset other jobs cached")
	}
}
