package stream_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicedata/sluice/internal/s3test"
	"github.com/sluicedata/sluice/internal/stores"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/retry"
	"github.com/sluicedata/sluice/storage/storagetest"
	"github.com/sluicedata/sluice/stream"
)

// s3Rig is a dataset uploaded to the real S3 server (.ci/services.sh)
// and a fault proxy in front of that server.
type s3Rig struct {
	proxy  *storagetest.FaultProxy
	remote string // s3:// URL of the dataset through the proxy
	n      int    // samples

	mu     sync.Mutex
	events []retry.Event
}

// newS3Rig uploads a dataset of n samples or skips without a server
// (fails under SLUICE_REQUIRE_SERVICES=1).
func newS3Rig(t *testing.T, n int) *s3Rig {
	t.Helper()
	srv := s3test.Require(t)
	srv.SetCredentialEnv(t)
	prefix := s3test.NewPrefix("stream-faults")
	direct := srv.Open(t, prefix)
	dir := t.TempDir()
	writeDataset(t, dir, spec{samples: n, payload: 200, sizeLimit: 2500, compression: "zstd"})
	s3test.UploadDir(t, direct, dir)
	proxy, err := storagetest.NewFaultProxy(srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	return &s3Rig{proxy: proxy, n: n, remote: srv.URL(proxy.URL, prefix)}
}

// retry is the policy under test: real waits, short ones.
func (r *s3Rig) retry(attempts int) *retry.Options {
	return &retry.Options{
		MaxAttempts: attempts, InitialBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond,
		ThrottleBackoff: 10 * time.Millisecond, MaxRetryAfter: 50 * time.Millisecond,
		AttemptTimeout: 10 * time.Second, StallTimeout: 150 * time.Millisecond,
		OnRetry: func(e retry.Event) {
			r.mu.Lock()
			r.events = append(r.events, e)
			r.mu.Unlock()
		},
	}
}

// faultKinds are the faults of the issue, each on a share of requests.
func faultKinds(rate float64, seed uint64) map[string]storagetest.ProxyFault {
	isGet := func(m func(*http.Request) bool) func(*http.Request) bool {
		return func(r *http.Request) bool { return r.Method == http.MethodGet && m(r) }
	}
	return map[string]storagetest.ProxyFault{
		"slowdown": {Kind: storagetest.Status, Status: 503, Body: storagetest.SlowDownBody, RetryAfter: "0", Match: storagetest.Rate(rate, seed)},
		"reset":    {Kind: storagetest.Reset, AfterBytes: 150, Match: isGet(storagetest.Rate(rate, seed+1))},
		"truncate": {Kind: storagetest.Truncate, AfterBytes: 150, Match: isGet(storagetest.Rate(rate, seed+2))},
		"stall":    {Kind: storagetest.Stall, AfterBytes: 150, Match: isGet(storagetest.Rate(rate, seed+3))},
	}
}

// TestStreamOpenThroughS3Faults: stream.Open and a full epoch against the
// real S3 server through 1%, 10% and 30% of each fault kind (fresh cache
// every time, so index.json and every shard go through the faults): every
// sample exactly once, no operation past its retry budget.
func TestStreamOpenThroughS3Faults(t *testing.T) {
	rig := newS3Rig(t, 1000)
	const attempts = 12
	for _, rate := range []float64{0.01, 0.10, 0.30} {
		for _, kind := range []string{"slowdown", "reset", "truncate", "stall"} {
			t.Run(fmt.Sprintf("%s-%.0f%%", kind, rate*100), func(t *testing.T) {
				rig.proxy.Clear()
				rig.proxy.Inject(faultKinds(rate, uint64(rate*1000))[kind])
				before := rig.proxy.Requests()
				injected := rig.proxy.Injected(storagetest.Status) + rig.proxy.Injected(storagetest.Reset) +
					rig.proxy.Injected(storagetest.Truncate) + rig.proxy.Injected(storagetest.Stall)
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				for epoch := range 1 { // a fresh cache: every file through the faults
					ds, err := stream.Open(ctx, &stream.Options{Remote: rig.remote, Local: t.TempDir(), Registry: stores.Default(),
						Retry: rig.retry(attempts), BatchSize: 8, DownloadRetry: 1})
					if err != nil {
						t.Fatalf("epoch %d: Open: %v", epoch, err)
					}
					checkOnce(t, readAll(t, ctx, ds), rig.n)
					ds.Close()
				}
				k := rig.proxy.Injected(storagetest.Status) + rig.proxy.Injected(storagetest.Reset) +
					rig.proxy.Injected(storagetest.Truncate) + rig.proxy.Injected(storagetest.Stall)
				t.Logf("%d requests, %d faults injected", rig.proxy.Requests()-before, k-injected)
				if rate >= 0.3 && k == injected {
					t.Error("no fault injected at 30%")
				}
			})
		}
	}
	rig.mu.Lock()
	defer rig.mu.Unlock()
	for _, e := range rig.events {
		if e.Attempt >= attempts {
			t.Errorf("retry at attempt %d of a budget of %d: %+v", e.Attempt, attempts, e)
		}
	}
	if len(rig.events) == 0 {
		t.Error("no retries seen: the faults did not reach the decorator")
	}
}

// TestStreamS3AllFaults: at 100% faults Open fails within the budget, the
// error naming the URL, the operation, the attempts and the last cause.
func TestStreamS3AllFaults(t *testing.T) {
	rig := newS3Rig(t, 20)
	rig.proxy.Inject(storagetest.ProxyFault{Kind: storagetest.Status, Status: 503, Body: storagetest.SlowDownBody})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	before := rig.proxy.Requests()
	_, err := stream.Open(ctx, &stream.Options{Remote: rig.remote, Local: t.TempDir(), Registry: stores.Default(), Retry: rig.retry(4)})
	var re *retry.Error
	if !errors.As(err, &re) || ctx.Err() != nil {
		t.Fatalf("Open at 100%% faults: %v, want a *retry.Error", err)
	}
	if re.Attempts != 4 || re.Op != "get" || !strings.Contains(re.URL, "index.json") || storage.HTTPStatus(err) != 503 {
		t.Errorf("error %v: op %q url %q attempts %d status %d", err, re.Op, re.URL, re.Attempts, storage.HTTPStatus(err))
	}
	if !strings.Contains(err.Error(), "SlowDown") {
		t.Errorf("error %q does not give the last cause", err)
	}
	if n := rig.proxy.Requests() - before; n != 4 {
		t.Errorf("%d requests, want the budget of 4", n)
	}
}

// TestStreamS3Outage: the store down for 2 seconds (every request reset)
// at the start of a run does not end it under the default retry policy.
func TestStreamS3Outage(t *testing.T) {
	rig := newS3Rig(t, 100)
	until := time.Now().Add(2 * time.Second)
	rig.proxy.Inject(storagetest.ProxyFault{Kind: storagetest.Reset, Match: func(*http.Request) bool { return time.Now().Before(until) }})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ds, err := stream.Open(ctx, &stream.Options{Remote: rig.remote, Local: t.TempDir(), Registry: stores.Default(), BatchSize: 8})
	if err != nil {
		t.Fatalf("Open through a 2 s outage: %v", err)
	}
	defer ds.Close()
	checkOnce(t, readAll(t, ctx, ds), rig.n)
	if time.Now().Before(until) {
		t.Error("the run finished inside the outage: the fault did not apply")
	}
}
