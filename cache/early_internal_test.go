package cache

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sluicedata/sluice/storage/memstore"
)

// TestAcquireEarly holds a fetch between the end of its writes and its
// sync and rename: AcquireEarly's lease reads the complete temporary file
// while the final name does not exist yet, the shard is not evicted, and
// once committed the lease holds the renamed file's shared lock (another
// process could not evict it) until Release.
func TestAcquireEarly(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	data := bytes.Repeat([]byte("sluice-early-"), 4000)
	c, mb, held, resume := heldCache(t, dir, data)
	d, err := c.Add(ctx, &Source{Bucket: mb, Backoff: func(int) time.Duration { return time.Millisecond },
		Shards: []Shard{{Files: []File{{Raw: "s.mds", RawBytes: int64(len(data))}}}}})
	if err != nil {
		t.Fatal(err)
	}
	l, err := d.AcquireEarly(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The fetch signals the early leases and then runs the hook, which
	// holds it before its sync and rename (a lease that waited for the
	// commit would never have been granted).
	<-held
	p := l.ReadPath(0)
	if !strings.HasSuffix(p, partSuffix) {
		t.Fatalf("ReadPath during the commit = %s, want the temporary file", p)
	}
	if _, err := os.Stat(l.Path(0)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("final file exists before its sync and rename: %v", err)
	}
	got, err := os.ReadFile(p)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("temporary file: %d bytes, err %v; want the complete %d bytes", len(got), err, len(data))
	}
	// A second lease shares the early one.
	l2, err := d.AcquireEarly(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if l2.ReadPath(0) != p {
		t.Errorf("second lease reads %s, want %s", l2.ReadPath(0), p)
	}
	l2.Release()
	var freed int64
	if err := c.locked(ctx, func() error {
		freed = c.evict(1<<40, 0, true, nil, -1)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if freed != 0 {
		t.Errorf("evicted %d bytes of a shard being committed", freed)
	}
	close(resume)
	if err := l.Committed(ctx); err != nil {
		t.Fatal(err)
	}
	if l.ReadPath(0) != l.Path(0) {
		t.Errorf("ReadPath after the commit = %s, want %s", l.ReadPath(0), l.Path(0))
	}
	if got, err := os.ReadFile(l.Path(0)); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("final file: %d bytes, err %v", len(got), err)
	}
	if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("temporary file left after the commit: %v", err)
	}
	f, err := os.Open(l.Path(0))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if ok, err := tryLock(f, true); err != nil || ok {
		t.Fatalf("exclusive lock on a leased shard: ok=%v err=%v, want refused", ok, err)
	}
	l.Release()
	// Released, the shard stays held idle (idlehold.go) until this
	// process's eviction (or the hold's end) lets go of it.
	if ok, err := tryLock(f, true); err != nil || ok {
		t.Fatalf("exclusive lock on a shard held idle: ok=%v err=%v, want refused", ok, err)
	}
	l.d.dropIdle(0)
	if ok, err := tryLock(f, true); err != nil || !ok {
		t.Fatalf("exclusive lock after the idle hold ended: ok=%v err=%v, want granted", ok, err)
	}
}

// TestWaiterKeepsShard: a caller waiting for a fetch gets the shard even
// when an eviction runs between the end of the fetch and the caller's
// wake-up: the fetch pins the shard for its waiters, so nothing is evicted
// and the shard is downloaded once.
func TestWaiterKeepsShard(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	data := bytes.Repeat([]byte("sluice-pin-"), 3000)
	mb := memstore.New("src")
	w, err := mb.NewWriter(ctx, "s.mds", nil)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(data)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	c, err := Open(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	held, resume := make(chan struct{}), make(chan struct{})
	c.beforePin = func(int) {
		close(held)
		<-resume
	}
	freed := make(chan int64, 1)
	c.afterFlight = func(int) {
		var n int64
		_ = c.locked(ctx, func() error {
			n = c.evict(1<<40, 0, true, nil, -1)
			return nil
		})
		freed <- n
	}
	d, err := c.Add(ctx, &Source{Bucket: mb, Backoff: func(int) time.Duration { return time.Millisecond },
		Shards: []Shard{{Files: []File{{Raw: "s.mds", RawBytes: int64(len(data))}}}}})
	if err != nil {
		t.Fatal(err)
	}
	done, ferr := d.Prefetch(0, 1)
	<-held // written, committed and handed off; not pinned yet
	c.mu.Lock()
	fl := d.st[0].flight
	c.mu.Unlock()
	type result struct {
		l   *Lease
		err error
	}
	got := make(chan result, 1)
	go func() {
		l, err := d.Acquire(ctx, 0)
		got <- result{l, err}
	}()
	for { // until the caller waits for the flight
		c.mu.Lock()
		n := fl.waiters
		c.mu.Unlock()
		if n > 0 {
			break
		}
		runtime.Gosched()
	}
	close(resume)
	<-done
	if err := ferr(); err != nil {
		t.Fatal(err)
	}
	if n := <-freed; n != 0 {
		t.Errorf("evicted %d bytes of a shard its waiter had not leased yet", n)
	}
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.l.Release()
	if b, err := os.ReadFile(r.l.Path(0)); err != nil || !bytes.Equal(b, data) {
		t.Fatalf("leased file: %d bytes, err %v", len(b), err)
	}
	if n := d.Stats().Downloads; n != 1 {
		t.Errorf("%d downloads, want 1", n)
	}
	c.mu.Lock()
	refs := d.st[0].refs
	c.mu.Unlock()
	if refs != 1 {
		t.Errorf("refs = %d with one lease, want 1", refs)
	}
}
