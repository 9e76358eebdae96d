package stream_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicedata/sluice/internal/stores"
	"github.com/sluicedata/sluice/storage/storagetest"
	"github.com/sluicedata/sluice/stream"
)

// TestColdOpenNeedsNoIndexStat: against the real S3 server, a cold Open
// records the index's ETag and time from its GET's response, with no HEAD
// request; the next Open, from the cache, checks them with one Stat and
// finds the remote unchanged.
func TestColdOpenNeedsNoIndexStat(t *testing.T) {
	rig := newS3Rig(t, 200)
	var heads atomic.Int64
	rig.proxy.Inject(storagetest.ProxyFault{Kind: storagetest.Status, Status: 500, Match: func(r *http.Request) bool {
		if r.Method == http.MethodHead {
			heads.Add(1)
		}
		return false // count, never fail
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	local := t.TempDir()
	open := func() (*stream.Dataset, error) {
		return stream.Open(ctx, &stream.Options{Remote: rig.remote, Local: local, Registry: stores.Default(),
			Retry: rig.retry(3), BatchSize: 8})
	}
	ds, err := open()
	if err != nil {
		t.Fatal(err)
	}
	if err := ds.Close(); err != nil { // waits for the index's write and stamp
		t.Fatal(err)
	}
	if n := heads.Load(); n != 0 {
		t.Errorf("cold Open sent %d HEAD requests, want 0 (the GET's response tells the ETag)", n)
	}
	ds, err = open()
	if err != nil {
		t.Fatalf("reopen of an unchanged remote: %v", err)
	}
	ds.Close()
	if n := heads.Load(); n != 1 {
		t.Errorf("warm Open sent %d HEAD requests in all, want 1 (the freshness check)", n)
	}
}
