package s3store_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/retry"
	"github.com/sluicedata/sluice/storage/s3store"
	"github.com/sluicedata/sluice/storage/storagetest"
)

// faultRig is an s3store Bucket that talks to the real S3 server through a
// fault-injecting proxy, wrapped in the retry decorator, plus a direct
// Bucket on the same prefix for setting up objects.
type faultRig struct {
	proxy  *storagetest.FaultProxy
	direct *s3store.Bucket
	rb     *retry.Bucket

	mu     sync.Mutex
	events []retry.Event
}

func newFaultRig(t *testing.T, maxAttempts int) *faultRig {
	t.Helper()
	s := testServer(t)
	direct := newBucket(t, s)
	proxy, err := storagetest.NewFaultProxy(s.endpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	opts := s.options()
	opts.Endpoint = proxy.URL
	root := strings.TrimPrefix(direct.URL(""), "s3://"+s.bucket+"/")
	viaProxy, err := s3store.New(t.Context(), s.bucket, root, opts)
	if err != nil {
		t.Fatal(err)
	}
	rig := &faultRig{proxy: proxy, direct: direct}
	rig.rb, err = retry.New(viaProxy, &retry.Options{
		MaxAttempts:     maxAttempts,
		InitialBackoff:  time.Millisecond,
		MaxBackoff:      4 * time.Millisecond,
		ThrottleBackoff: 2 * time.Millisecond,
		MaxRetryAfter:   3 * time.Second,
		// A stall is real silence on the wire, so this one is a real
		// timeout; the backoff waits below are not.
		StallTimeout: 250 * time.Millisecond,
		Sleep: func(ctx context.Context, _ time.Duration) error {
			return ctx.Err()
		},
		OnRetry: func(e retry.Event) {
			rig.mu.Lock()
			rig.events = append(rig.events, e)
			rig.mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rig.rb.Close() })
	return rig
}

func (r *faultRig) retries() []retry.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]retry.Event(nil), r.events...)
}

// assertOnlyFile checks that dir holds exactly the named files: no
// temporary or partial file is left behind.
func assertOnlyFile(t *testing.T, dir string, names ...string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if strings.Join(got, ",") != strings.Join(names, ",") {
		t.Errorf("directory holds %q, want exactly %q", got, names)
	}
}

// TestDownloadThroughFaults downloads objects from versitygw through a
// proxy that breaks requests in every way the issue lists; each download
// must complete byte-exact.
func TestDownloadThroughFaults(t *testing.T) {
	const size = 3<<20 + 4321
	data := storagetest.Pattern(42, size)
	isGet := func(r *http.Request) bool { return r.Method == http.MethodGet && !r.URL.Query().Has("list-type") }
	for _, tc := range []struct {
		name   string
		faults []storagetest.ProxyFault
		opts   *storage.DownloadOptions
		kind   storagetest.ProxyFaultKind
	}{
		{"reset mid-body", []storagetest.ProxyFault{{Kind: storagetest.Reset, Match: isGet, AfterBytes: 200_000, Times: 3}}, nil, storagetest.Reset},
		{"reset mid-body in parallel parts", []storagetest.ProxyFault{{Kind: storagetest.Reset, Match: isGet, AfterBytes: 100_000, Times: 6}},
			&storage.DownloadOptions{PartSize: 512 << 10, Concurrency: 4}, storagetest.Reset},
		{"truncated body", []storagetest.ProxyFault{{Kind: storagetest.Truncate, Match: isGet, AfterBytes: 70_000, Times: 2}}, nil, storagetest.Truncate},
		{"500s", []storagetest.ProxyFault{{Kind: storagetest.Status, Status: 500, Times: 3}}, nil, storagetest.Status},
		{"503 SlowDown with Retry-After", []storagetest.ProxyFault{{Kind: storagetest.Status, Status: 503, RetryAfter: "2", Body: storagetest.SlowDownBody, Times: 2}}, nil, storagetest.Status},
		{"429 on HEAD", []storagetest.ProxyFault{{Kind: storagetest.Status, Method: http.MethodHead, Status: 429, RetryAfter: "1", Times: 2}}, nil, storagetest.Status},
		{"stalled body", []storagetest.ProxyFault{{Kind: storagetest.Stall, Match: isGet, AfterBytes: 64 << 10, Times: 1}}, nil, storagetest.Stall},
		{"everything at once", []storagetest.ProxyFault{
			{Kind: storagetest.Status, Status: 503, Body: storagetest.SlowDownBody, Times: 1},
			{Kind: storagetest.Reset, Match: isGet, AfterBytes: 300_000, Times: 2},
			{Kind: storagetest.Truncate, Match: isGet, AfterBytes: 10, Times: 2},
			{Kind: storagetest.Stall, Match: isGet, AfterBytes: 1000, Times: 1},
		}, &storage.DownloadOptions{PartSize: 1 << 20, Concurrency: 3}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rig := newFaultRig(t, 10)
			storagetest.Put(t, rig.direct, "shard.mds", data)
			rig.proxy.Inject(tc.faults...)

			dir := t.TempDir()
			dst := filepath.Join(dir, "shard.mds")
			n, err := storage.Download(t.Context(), rig.rb, "shard.mds", dst, tc.opts)
			if err != nil {
				t.Fatalf("Download: %v", err)
			}
			got, err := os.ReadFile(dst)
			if err != nil {
				t.Fatal(err)
			}
			if n != size || !bytes.Equal(got, data) {
				t.Fatalf("downloaded %d bytes (returned %d), not byte-exact with the %d stored", len(got), n, size)
			}
			assertOnlyFile(t, dir, "shard.mds")
			if tc.kind != 0 && rig.proxy.Injected(tc.kind) == 0 {
				t.Errorf("no %v fault was injected: the test exercised nothing", tc.kind)
			}
			if len(rig.retries()) == 0 {
				t.Error("the retry decorator saw no failure")
			}
			for _, f := range tc.faults {
				if f.RetryAfter == "" {
					continue
				}
				// The server's Retry-After (whole seconds) sets the wait.
				want, _ := time.ParseDuration(f.RetryAfter + "s")
				for _, e := range rig.retries() {
					if storage.HTTPStatus(e.Err) == f.Status && e.Delay < want {
						t.Errorf("waited %v after %v, want at least the Retry-After of %v", e.Delay, e.Err, want)
					}
				}
			}
		})
	}
}

// TestDownloadBudgetSpent checks the other outcome: when the store keeps
// failing, Download fails after the budget with an error naming the URL,
// the operation and the last cause, and leaves no file behind.
func TestDownloadBudgetSpent(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault storagetest.ProxyFault
	}{
		{"503 forever", storagetest.ProxyFault{Kind: storagetest.Status, Status: 503, Body: storagetest.SlowDownBody}},
		// Without progress: a body that breaks after some bytes resumes
		// with a fresh budget, by design.
		{"reset before any byte, forever", storagetest.ProxyFault{Kind: storagetest.Reset, Method: http.MethodGet}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rig := newFaultRig(t, 4)
			data := storagetest.Pattern(1, 500_000)
			storagetest.Put(t, rig.direct, "obj", data)
			dir := t.TempDir()
			dst := filepath.Join(dir, "obj")
			rig.proxy.Inject(tc.fault)
			_, err := storage.Download(t.Context(), rig.rb, "obj", dst, &storage.DownloadOptions{Size: int64(len(data))})
			if err == nil {
				t.Fatal("Download succeeded through a store that always fails")
			}
			var re *retry.Error
			if !errors.As(err, &re) {
				t.Fatalf("Download error %v is not a *retry.Error", err)
			}
			if re.Attempts != 4 {
				t.Errorf("gave up after %d attempts, want the budget of 4", re.Attempts)
			}
			msg := err.Error()
			t.Logf("error after the budget: %s", msg)
			if !strings.Contains(msg, rig.direct.URL("obj")) {
				t.Errorf("error %q does not name %s", msg, rig.direct.URL("obj"))
			}
			assertOnlyFile(t, dir)
		})
	}
}

// TestPermanentErrorsFailAtOnce checks that a missing object is not
// retried.
func TestPermanentErrorsFailAtOnce(t *testing.T) {
	rig := newFaultRig(t, 10)
	dir := t.TempDir()
	_, err := storage.Download(t.Context(), rig.rb, "missing", filepath.Join(dir, "missing"), nil)
	if !errors.Is(err, storage.ErrNotExist) {
		t.Fatalf("Download of a missing object = %v, want ErrNotExist", err)
	}
	if n := len(rig.retries()); n != 0 {
		t.Errorf("a missing object was retried %d times", n)
	}
	assertOnlyFile(t, dir)
}

// TestUploadThroughFaults uploads a multipart object through 500s and
// resets; the retry decorator repeats the upload from its replayable
// source, and the stored object is exact.
func TestUploadThroughFaults(t *testing.T) {
	rig := newFaultRig(t, 10)
	data := storagetest.Pattern(77, 11<<20)
	rig.proxy.Inject(
		storagetest.ProxyFault{Kind: storagetest.Status, Method: http.MethodPut, Status: 500, Times: 2},
		storagetest.ProxyFault{Kind: storagetest.Status, Method: http.MethodPost, Status: 503, Body: storagetest.SlowDownBody, Times: 1},
	)
	err := storage.Upload(t.Context(), rig.rb, "up.bin", bytes.NewReader(data), int64(len(data)), &storage.WriteOptions{PartSize: 5 << 20})
	if err != nil {
		t.Fatalf("Upload: %v", err)
	}
	if rig.proxy.Injected(storagetest.Status) == 0 {
		t.Error("no fault was injected")
	}
	if got := storagetest.Get(t, rig.direct, "up.bin"); !bytes.Equal(got, data) {
		t.Errorf("stored object (%d bytes) differs from the %d uploaded", len(got), len(data))
	}
}
