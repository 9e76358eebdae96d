package cache

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicedata/sluice/storage"
)

// getSignal is a bucket that says on got when a GET is asked for.
type getSignal struct {
	storage.Bucket
	got chan struct{}
}

func (g *getSignal) NewRangeReader(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	select {
	case g.got <- struct{}{}:
	default:
	}
	return g.Bucket.NewRangeReader(ctx, key, off, n)
}

// addInMemory registers the one-file shard rel of b, of size bytes, with
// c, fetched in memory.
func addInMemory(t *testing.T, c *Cache, b storage.Bucket, rel string, size int) *Dataset {
	t.Helper()
	d, err := c.Add(context.Background(), &Source{Bucket: b, Backoff: func(int) time.Duration { return time.Millisecond },
		InMemory: func(int) bool { return true },
		Shards:   []Shard{{Files: []File{{Raw: rel, RawBytes: int64(size)}}}}})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestPrefetchBesideDirectoryLock: in a cache without a limit, a prefetch
// of a shard fetched in memory neither waits for the directory lock on
// its caller's goroutine (a prefetch walk admitting its next fetches one
// after the other) nor before its GET: the lock is held by another holder
// (another shard's rename or creation) while Prefetch is called, and
// Prefetch returns and the GET begins before it is let go. Its room is
// counted and its temporary file created once the lock is free, and the
// shard ends up whole, counted once, with no temporary file left.
func TestPrefetchBesideDirectoryLock(t *testing.T) {
	ctx := context.Background()
	data := memData()
	dir := t.TempDir()
	bk := &getSignal{Bucket: memWith(t, data, "s.mds"), got: make(chan struct{}, 1)}
	c, err := Open(ctx, dir, &Options{Memory: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	d := addInMemory(t, c, bk, "s.mds", len(data))
	held, release := make(chan struct{}), make(chan struct{})
	lockErr := make(chan error, 1)
	go func() {
		lockErr <- c.locked(ctx, func() error {
			close(held)
			<-release
			return nil
		})
	}()
	select {
	case <-held:
	case <-time.After(20 * time.Second):
		t.Fatal("the directory lock was not taken in 20 s")
	}
	var (
		done     <-chan struct{}
		fetchErr func() error
		returned = make(chan struct{})
	)
	go func() {
		done, fetchErr = d.Prefetch(0, 1)
		close(returned)
	}()
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	for _, step := range []struct {
		what string
		ch   <-chan struct{}
	}{{"Prefetch returned", returned}, {"its GET began", bk.got}} {
		select {
		case <-step.ch:
		case <-deadline.C:
			close(release)
			t.Fatalf("with the directory lock held, not after 20 s: %s (waited for the lock)", step.what)
		}
	}
	close(release)
	select {
	case err := <-lockErr:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the directory lock was not let go in 20 s")
	}
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("the prefetch did not end in a minute after the lock was let go")
	}
	if err := fetchErr(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "s.mds"))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("committed shard: %d bytes (%v), want %d", len(got), err, len(data))
	}
	if _, err := os.Stat(filepath.Join(dir, "s.mds") + partSuffix); !os.IsNotExist(err) {
		t.Fatalf("temporary file left after the commit (stat: %v)", err)
	}
	if u, err := c.Usage(ctx); err != nil || u < int64(len(data)) || u >= 2*int64(len(data)) {
		t.Fatalf("usage %d (%v), want the shard's %d bytes counted once (plus the manifest)", u, err, len(data))
	}
}
