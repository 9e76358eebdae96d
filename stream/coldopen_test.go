package stream_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/sluicedata/sluice/plan"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/stream"
)

// indexGate is a bucket that reports each request for the index on asked
// and, with hold set, keeps the request waiting until its context ends
// (or, so that a broken Open cannot hang the test, for 20 seconds: then
// expired is closed and the request fails for good, not retried).
type indexGate struct {
	storage.Bucket
	asked   chan struct{}
	hold    bool
	expired chan struct{}
}

func (g *indexGate) Close() error { return nil }

func (g *indexGate) NewRangeReader(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if key == "index.json" {
		select {
		case g.asked <- struct{}{}:
		default:
		}
		if g.hold {
			t := time.NewTimer(20 * time.Second)
			defer t.Stop()
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-t.C:
				close(g.expired)
				return nil, fmt.Errorf("index request held for 20 s: %w", storage.ErrPermission)
			}
		}
	}
	return g.Bucket.NewRangeReader(ctx, key, off, n)
}

// TestColdOpenAsksIndexWhileCacheOpens: a cold Open requests the index
// without waiting for its own cache to open (which creates the cache's
// directories and files, ~0.4 ms of a time to first sample of ~10), and
// reads the whole epoch through that cache afterwards. The cache's
// directory lock is held by another open file until the index is asked
// for: an Open that opened its cache first would wait for that lock, and
// the index would never be asked for while it is held.
func TestColdOpenAsksIndexWhileCacheOpens(t *testing.T) {
	_, cb := memDataset(t, spec{samples: 300, payload: 64, sizeLimit: 4 << 10})
	g := &indexGate{Bucket: cb, asked: make(chan struct{}, 1)}
	reg := &storage.Registry{}
	reg.Register("mem", func(context.Context, *url.URL) (storage.Bucket, error) { return g, nil })
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, ".sluice", "locks"), 0o700); err != nil {
		t.Fatal(err)
	}
	lf, err := os.OpenFile(filepath.Join(root, ".sluice", "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	type result struct {
		ds  *stream.Dataset
		err error
	}
	opened := make(chan result, 1)
	go func() {
		ds, err := stream.Open(context.Background(), &stream.Options{Remote: "mem://data", Local: root, Registry: reg, BatchSize: 4})
		opened <- result{ds, err}
	}()
	wait := time.NewTimer(5 * time.Second) // under the cache's 10 s lock timeout
	defer wait.Stop()
	select {
	case <-g.asked:
	case r := <-opened:
		t.Fatalf("Open returned (%v) before asking for the index", r.err)
	case <-wait.C:
		syscall.Flock(int(lf.Fd()), syscall.LOCK_UN)
		if r := <-opened; r.err == nil {
			r.ds.Close()
		}
		t.Fatal("the index was not asked for while the cache's lock was held: Open waited for its cache first")
	}
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	r := <-opened // bounded: the cache's lock is free now
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.ds.Close()
	if got := r.ds.Cache().Dir(); got != root {
		t.Fatalf("cache at %s, want %s", got, root)
	}
	ep, err := r.ds.NewEpoch(context.Background(), plan.World{Nodes: 1, RanksPerNode: 1}, 1)
	if err != nil {
		t.Fatal(err)
	}
	it, err := ep.RankIter(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var n, ids int64
	for it.Next() {
		n++
		ids += it.ID()
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	if n != 300 || ids != 300*299/2 {
		t.Fatalf("%d samples with id sum %d, want 300 and %d", n, ids, 300*299/2)
	}
	if _, err := os.Stat(filepath.Join(root, "index.json")); err != nil {
		t.Fatalf("index not cached: %v", err)
	}
}

// TestColdOpenCacheFailureEndsIndexRequest: when the cache cannot be
// opened (its directory is a file), Open fails with the cache's error at once,
// without waiting for the index request made meanwhile, which a slow or
// unreachable store could keep going for minutes of retries.
func TestColdOpenCacheFailureEndsIndexRequest(t *testing.T) {
	_, cb := memDataset(t, spec{samples: 20, payload: 64, sizeLimit: 4 << 10})
	// The cache's failure and the index request race: where the failure
	// comes first, Open ends before the request was sent, and the run
	// says nothing of the request. Runs are repeated until one where the
	// request was in flight (1 run in 4-6 under -race at a load of ~13
	// was the other kind).
	for attempt := 1; ; attempt++ {
		g := &indexGate{Bucket: cb, asked: make(chan struct{}, 1), hold: true, expired: make(chan struct{})}
		reg := &storage.Registry{}
		reg.Register("mem", func(context.Context, *url.URL) (storage.Bucket, error) { return g, nil })
		root := t.TempDir()
		// The cache's own directory is a file: its Open fails, while the
		// index is not in the root, so it is asked for.
		if err := os.WriteFile(filepath.Join(root, ".sluice"), []byte("not a directory"), 0o600); err != nil {
			t.Fatal(err)
		}
		ds, err := stream.Open(context.Background(), &stream.Options{Remote: "mem://data", Local: root, Registry: reg, BatchSize: 4})
		if err == nil {
			ds.Close()
			t.Fatal("Open succeeded with its cache root a file")
		}
		if !errors.Is(err, syscall.ENOTDIR) {
			t.Fatalf("Open: %v, want the cache's error (not a directory)", err)
		}
		select {
		case <-g.expired:
			t.Fatalf("Open waited for the held index request (%v)", err)
		default:
		}
		select {
		case <-g.asked:
			return
		default:
		}
		if attempt == 50 {
			t.Fatalf("Open (%v) never asked for the index while its cache opened, in %d runs", err, attempt)
		}
	}
}
