package cache_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluicedata/sluice/cache"
	"github.com/sluicedata/sluice/internal/s3test"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/s3store"
	"github.com/sluicedata/sluice/storage/storagetest"
)

// TestRangedShardChecked: a shard large enough to be fetched as parallel
// ranges (33 MB: 5 ranged GETs) from the real S3 server is checked
// against the store's checksum of the whole object, which no ranged
// response carries. A range damaged in transit once (one byte inverted,
// length and connection intact) makes the download fetch the shard again,
// and the cached file is the uploaded one; a range damaged on every read
// fails the lease with storage.ErrChecksum and leaves no file. Before,
// the damaged range was cached as the shard. The requests each download
// makes are cache.Requests's count, which the simulator uses.
func TestRangedShardChecked(t *testing.T) {
	srv := s3test.Require(t)
	prefix := s3test.NewPrefix("ranged-shard")
	const size = 33<<20 + 5
	data := storagetest.Pattern(41, size)
	srv.SetCredentialEnv(t)
	// Clients of the test's own, whose idle connections it closes (the
	// package's TestMain checks that no goroutine outlives the tests); no
	// custom CA bundle, which the SDK installs only in a client of its own.
	t.Setenv("AWS_CA_BUNDLE", "")
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	open := func(endpoint string) *s3store.Bucket {
		b, err := s3store.New(t.Context(), srv.Bucket, prefix, &s3store.Options{Endpoint: endpoint, Region: srv.Region,
			HTTPClient: &http.Client{Transport: tr}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	direct := open(srv.Endpoint)
	t.Cleanup(func() { direct.Delete(context.Background(), "big.mds") })
	// One PUT: versitygw keeps no checksum of a multipart upload sent
	// without one (AWS S3 keeps a full-object CRC64-NVME of every upload).
	if _, err := storage.WriteFrom(t.Context(), direct, "big.mds", bytes.NewReader(data), &storage.WriteOptions{PartSize: 64 << 20}); err != nil {
		t.Fatal(err)
	}
	if info, err := direct.Stat(t.Context(), "big.mds"); err != nil || storage.NewRangeCheck(info.Checksum, size) == nil {
		t.Fatalf("Stat: %+v, %v: the server reports no checksum ranges can be checked against", info, err)
	}
	proxy, err := storagetest.NewFaultProxy(srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	viaProxy := open(proxy.URL)
	lease := func(t *testing.T) (*cache.Lease, string, error) {
		c, err := cache.Open(t.Context(), t.TempDir(), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		src := &cache.Source{Bucket: viaProxy, Attempts: 3, Backoff: func(int) time.Duration { return time.Millisecond },
			Shards: []cache.Shard{{Files: []cache.File{{Raw: "big.mds", RawBytes: size}}}}}
		d, err := c.Add(t.Context(), src)
		if err != nil {
			t.Fatal(err)
		}
		l, err := d.Acquire(context.WithoutCancel(t.Context()), 0)
		return l, c.Dir(), err
	}
	second := func(r *http.Request) bool {
		return r.Method == http.MethodGet && strings.HasPrefix(r.Header.Get("Range"), "bytes=8388608-")
	}

	before := proxy.Requests()
	l, _, err := lease(t)
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	if got, want := proxy.Requests()-before, cache.Requests(size); got != want {
		t.Errorf("one download made %d requests, cache.Requests says %d", got, want)
	}

	proxy.Inject(storagetest.ProxyFault{Kind: storagetest.Corrupt, Match: second, AfterBytes: 1 << 20, Times: 1})
	l, _, err = lease(t)
	if err != nil {
		t.Fatalf("through one damaged range: %v", err)
	}
	got, err := os.ReadFile(l.Path(0))
	l.Release()
	if err != nil || !bytes.Equal(got, data) || proxy.Injected(storagetest.Corrupt) != 1 {
		t.Fatalf("cached %d bytes, equal to the upload: %v (%v); %d ranges damaged", len(got), bytes.Equal(got, data), err,
			proxy.Injected(storagetest.Corrupt))
	}

	// The Stat that reports the checksum fails once (a 500) while a range
	// is damaged: the attempt fails instead of caching the ranges
	// unchecked, and the next one checks them. Before, the damaged range
	// was cached as the shard.
	head := func(r *http.Request) bool { return r.Method == http.MethodHead }
	proxy.Inject(storagetest.ProxyFault{Kind: storagetest.Status, Status: http.StatusInternalServerError, Match: head, Times: 1})
	proxy.Inject(storagetest.ProxyFault{Kind: storagetest.Corrupt, Match: second, AfterBytes: 1 << 20, Times: 1})
	l, _, err = lease(t)
	if err != nil {
		t.Fatalf("through a failed Stat and a damaged range: %v", err)
	}
	got, err = os.ReadFile(l.Path(0))
	l.Release()
	if err != nil || !bytes.Equal(got, data) || proxy.Injected(storagetest.Status) != 1 {
		t.Fatalf("through a failed Stat: cached %d bytes, equal to the upload: %v (%v); %d Stats failed", len(got),
			bytes.Equal(got, data), err, proxy.Injected(storagetest.Status))
	}
	proxy.Clear()

	proxy.Inject(storagetest.ProxyFault{Kind: storagetest.Corrupt, Match: second, AfterBytes: 10, Times: 1000})
	_, dir, err := lease(t)
	if !errors.Is(err, storage.ErrChecksum) || !strings.Contains(err.Error(), "big.mds") {
		t.Fatalf("a range damaged on every read: %v, want storage.ErrChecksum naming big.mds", err)
	}
	if n := dirBytes(t, dir); n != 0 {
		t.Fatalf("a failed download left %d bytes in the cache", n)
	}
}
