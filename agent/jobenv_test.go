package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/sluicedata/sluice/agentapi"
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
	key, secret := os.Getenv("SLUICE_TEST_S3_ACCESS_KEY"), os.Getenv("SLUICE_TEST_S3_SECRET_KEY")
	var rb [6]byte
	rand.Read(rb[:])
	prefix := "test/agent-jobenv-" + hex.EncodeToString(rb[:])
	ctx := context.Background()
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	// The fixture is uploaded with the server's keys given explicitly: CI
	// exports only SLUICE_TEST_S3_*, not the AWS variables.
	direct, err := s3store.New(ctx, bucket, prefix, &s3store.Options{Endpoint: endpoint, Region: region,
		Credentials: credentials.NewStaticCredentialsProvider(key, secret, "")})
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	src := t.TempDir()
	const n = 300
	writeDataset(t, src, n, 1<<10)
	ents, _ := os.ReadDir(src)
	shards := 0
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "shard.") {
			shards++
		}
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
	var shardGets atomic.Int64
	proxy.Inject(storagetest.ProxyFault{Kind: storagetest.Status, Status: 500, Match: func(r *http.Request) bool {
		if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/shard.") {
			shardGets.Add(1)
		}
		return false // count only
	}})

	raw := &storage.Registry{}
	raw.Register("s3", s3store.Open)
	a, err := New(&Options{Registry: raw, IdleTimeout: -1})
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
	dial := func() *agentapi.Client {
		c, err := agentapi.Dial(ctx, SocketPath(filepath.Join(adir, "agent")), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
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
