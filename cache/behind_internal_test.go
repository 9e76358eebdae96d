package cache

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestWriteFileBehindHoldsCommits: while a WriteFileBehind write (an
// index) is held before it starts, a shard is downloaded and readable
// early from its temporary file, but not renamed into place; once the
// write ends the index and then the shard are in place (WaitWrite waits
// for it meanwhile). A write that
// fails refuses every later commit (the shard stays a temporary file,
// which a restart discards), and nothing is renamed into place.
func TestWriteFileBehindHoldsCommits(t *testing.T) {
	ctx := context.Background()
	data := bytes.Repeat([]byte("sluice-behind-"), 3000)
	mb := memWith(t, data, "ds/a.mds", "ds/b.mds")
	dir := t.TempDir()
	c, err := Open(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	hold := make(chan struct{})
	c.behind.hold = hold
	index := []byte(`{"version": 2, "shards": []}`)
	wait, err := c.WriteFileBehind("ds/index.json", index)
	if err != nil {
		t.Fatal(err)
	}
	d, err := c.Add(ctx, &Source{Bucket: mb, Backoff: func(int) time.Duration { return time.Millisecond },
		Shards: []Shard{{Files: []File{{Raw: "ds/a.mds", RawBytes: int64(len(data))}}},
			{Files: []File{{Raw: "ds/b.mds", RawBytes: int64(len(data))}}}}})
	if err != nil {
		t.Fatal(err)
	}
	lctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	l, err := d.AcquireEarly(lctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(l.ReadPath(0))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("early read of %s: %d bytes, %v; want the %d downloaded", l.ReadPath(0), len(got), err, len(data))
	}
	// Give the fetch time to reach its commit: it must wait there.
	time.Sleep(50 * time.Millisecond)
	if d.Present(0) {
		t.Fatal("shard renamed into place before the index write ended")
	}
	if _, err := os.Stat(filepath.Join(dir, "ds", "index.json")); err == nil {
		t.Fatal("index in place before its write was let go")
	}
	waited := make(chan error, 1)
	go func() { waited <- c.WaitWrite(ctx, "ds/index.json") }()
	select {
	case err := <-waited:
		t.Fatalf("WaitWrite returned (%v) while the write was held", err)
	case <-time.After(20 * time.Millisecond):
	}
	close(hold)
	if err := wait(); err != nil {
		t.Fatalf("index write: %v", err)
	}
	if err := <-waited; err != nil {
		t.Fatalf("WaitWrite: %v", err)
	}
	if err := c.WaitWrite(ctx, "ds/other.json"); err != nil {
		t.Fatalf("WaitWrite of a file never written: %v", err)
	}
	if err := l.Committed(lctx); err != nil {
		t.Fatalf("shard commit after the index write: %v", err)
	}
	l.Release()
	if !d.Present(0) {
		t.Fatal("shard not in place after the index write ended")
	}
	if b, err := os.ReadFile(filepath.Join(dir, "ds", "index.json")); err != nil || !bytes.Equal(b, index) {
		t.Fatalf("index in place: %q, %v", b, err)
	}

	// A write that fails refuses the commits under its directory that
	// come after it, and only those: another dataset's failed write
	// (its directory is a file here) leaves this one's alone.
	c.behind.hold = nil
	if err := os.WriteFile(filepath.Join(dir, "other"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := behindResult(c.WriteFileBehind("other/index.json", index)); err == nil {
		t.Fatal("write under a file: nil error")
	}
	if err := c.waitBehind(ctx, filepath.Join(dir, "ds", "a.mds")); err != nil {
		t.Fatalf("another directory's failed write gates this one's commits: %v", err)
	}
	if err := behindResult(c.WriteFileBehind("ds/../../outside.json", index)); err == nil {
		t.Fatal("write outside the cache: nil error")
	}
	if err := c.waitBehind(ctx, filepath.Join(dir, "ds", "a.mds")); err != nil {
		t.Fatalf("a refused path outside the cache gates commits: %v", err)
	}
	// ds's own index write fails: its temporary name is a directory.
	if err := os.Mkdir(filepath.Join(dir, "ds", "index.json.part"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := behindResult(c.WriteFileBehind("ds/index.json", index)); err == nil {
		t.Fatal("write onto a directory: nil error")
	}
	if _, err := d.Acquire(lctx, 1); err == nil {
		t.Fatal("shard committed after the write it must follow failed")
	} else if !bytes.Contains([]byte(err.Error()), []byte("waiting for the files it belongs to")) {
		t.Fatalf("commit after a failed write: %v, want it to name the wait", err)
	}
	if d.Present(1) {
		t.Fatal("shard in place after the write it must follow failed")
	}
}

// TestWriteFileBehindClose: Close waits for a write whose room was
// reserved and does not cut it short (the file is in place after it); one
// asked for after Close fails with ErrClosed.
func TestWriteFileBehindClose(t *testing.T) {
	dir := t.TempDir()
	c, err := Open(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	hold := make(chan struct{})
	c.behind.hold = hold
	wait, err := c.WriteFileBehind("ds/index.json", []byte("{}"))
	if err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	// Close must not return while the write is held.
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while the write was held", err)
	case <-time.After(20 * time.Millisecond):
	}
	close(hold)
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Close did not return within a minute")
	}
	// The write was reserved before Close: Close let it finish.
	if err := wait(); err != nil {
		t.Fatalf("write reserved before Close: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "ds", "index.json")); err != nil || string(b) != "{}" {
		t.Fatalf("index after Close: %q, %v; want it in place", b, err)
	}
	if err := behindResult(c.WriteFileBehind("ds/x.json", []byte("{}"))); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v, want ErrClosed", err)
	}
}

// TestWriteFileBehindRetryAfterFailure: a failed index write refuses the
// dataset's commits, but a later write of the same file (an Open that
// downloads the index again) takes its place: once it succeeds, shards
// are committed again rather than refused for the Cache's life.
func TestWriteFileBehindRetryAfterFailure(t *testing.T) {
	ctx := context.Background()
	data := bytes.Repeat([]byte("sluice-retry-"), 3000)
	mb := memWith(t, data, "ds/a.mds", "ds/b.mds")
	dir := t.TempDir()
	c, err := Open(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	index := []byte(`{"version": 2, "shards": []}`)
	if err := os.MkdirAll(filepath.Join(dir, "ds", "index.json.part"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := behindResult(c.WriteFileBehind("ds/index.json", index)); err == nil {
		t.Fatal("write onto a directory: nil error")
	}
	d, err := c.Add(ctx, &Source{Bucket: mb, Backoff: func(int) time.Duration { return time.Millisecond },
		Shards: []Shard{{Files: []File{{Raw: "ds/a.mds", RawBytes: int64(len(data))}}},
			{Files: []File{{Raw: "ds/b.mds", RawBytes: int64(len(data))}}}}})
	if err != nil {
		t.Fatal(err)
	}
	lctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := d.Acquire(lctx, 0); err == nil {
		t.Fatal("shard committed after its index write failed")
	}
	// The obstacle is gone; the index is written again.
	if err := os.Remove(filepath.Join(dir, "ds", "index.json.part")); err != nil {
		t.Fatal(err)
	}
	if err := behindResult(c.WriteFileBehind("ds/index.json", index)); err != nil {
		t.Fatalf("second index write: %v", err)
	}
	if err := c.WaitWrite(ctx, "ds/index.json"); err != nil {
		t.Fatalf("WaitWrite after the successful retry: %v", err)
	}
	l, err := d.Acquire(lctx, 1)
	if err != nil {
		t.Fatalf("shard refused after the index was written again: %v", err)
	}
	l.Release()
	if !d.Present(1) {
		t.Fatal("shard not in place after the index was written again")
	}
}

// behindResult waits for a WriteFileBehind write and returns its result.
func behindResult(wait func() error, _ error) error { return wait() }

// TestWriteFileBehindReservesFirst: WriteFileBehind returns with the
// file's room reserved (the write itself held), so that under a tight
// limit the caller's shards, fetched next, cannot take the room the index
// needs (the write would wait for room held by shards whose commits wait
// for it); a file larger than the limit fails at once, naming the limit,
// and gates the commits under its directory like a failed write.
func TestWriteFileBehindReservesFirst(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	c, err := Open(ctx, dir, &Options{Limit: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	hold := make(chan struct{})
	c.behind.hold = hold
	index := bytes.Repeat([]byte("i"), 3000)
	wait, err := c.WriteFileBehind("ds/index.json", index)
	if err != nil {
		t.Fatal(err)
	}
	if u, err := c.Usage(ctx); err != nil || u < int64(len(index)) {
		close(hold)
		t.Fatalf("usage %d (%v) right after WriteFileBehind, want the index's %d bytes reserved", u, err, len(index))
	}
	close(hold)
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	c.behind.hold = nil
	big := bytes.Repeat([]byte("j"), 5000)
	wait, err = c.WriteFileBehind("ds2/index.json", big)
	var le *LimitError
	if !errors.As(err, &le) {
		t.Fatalf("a file over the limit: %v, want a *LimitError", err)
	}
	if werr := wait(); werr == nil || werr.Error() != err.Error() {
		t.Fatalf("wait after a failed reservation: %v, want %v", werr, err)
	}
	if err := c.waitBehind(ctx, filepath.Join(dir, "ds2", "a.mds")); err == nil {
		t.Fatal("a failed reservation gates no commits")
	}
}

// TestCloseDuringIndexWriteKeepsShards: a shard downloaded and read early
// while its index's write is still going (held here) is committed when a
// Close comes meanwhile, not discarded: Close lets the index's write end
// and the shard's commit follow it, so the next run finds both in place.
func TestCloseDuringIndexWriteKeepsShards(t *testing.T) {
	ctx := context.Background()
	data := bytes.Repeat([]byte("sluice-close-"), 3000)
	mb := memWith(t, data, "ds/a.mds")
	dir := t.TempDir()
	c, err := Open(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	hold := make(chan struct{})
	c.behind.hold = hold
	index := []byte(`{"version": 2, "shards": []}`)
	if _, err := c.WriteFileBehind("ds/index.json", index); err != nil {
		t.Fatal(err)
	}
	d, err := c.Add(ctx, &Source{Bucket: mb, Backoff: func(int) time.Duration { return time.Millisecond },
		Shards: []Shard{{Files: []File{{Raw: "ds/a.mds", RawBytes: int64(len(data))}}}}})
	if err != nil {
		t.Fatal(err)
	}
	lctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	l, err := d.AcquireEarly(lctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(l.ReadPath(0)); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("early read: %d bytes, %v", len(got), err)
	}
	l.Release()
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	// Give Close time to cancel the background work before the write
	// goes on (its commit must not be cut short by that).
	time.Sleep(20 * time.Millisecond)
	close(hold)
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Close did not return within a minute")
	}
	if b, err := os.ReadFile(filepath.Join(dir, "ds", "index.json")); err != nil || !bytes.Equal(b, index) {
		t.Fatalf("index after Close: %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "ds", "a.mds")); err != nil || !bytes.Equal(b, data) {
		t.Fatalf("shard after Close: %d bytes, %v; want it committed", len(b), err)
	}
}

// TestWriteFileBehindAfterFirstDownload: in a cache without a limit, an
// index written behind takes nothing on its caller's path, neither its
// reservation nor its temporary file, until the Cache's first download
// has begun; then it is written, and the shard's commit still follows
// it. With no download it is written all the same, behindDelay later.
func TestWriteFileBehindAfterFirstDownload(t *testing.T) {
	ctx := context.Background()
	data := bytes.Repeat([]byte("sluice-first-"), 3000)
	mb := memWith(t, data, "ds/a.mds")
	dir := t.TempDir()
	c, err := Open(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	index := []byte(`{"version": 2, "shards": []}`)
	part := filepath.Join(dir, "ds", "index.json") + partSuffix
	wait, err := c.WriteFileBehind("ds/index.json", index)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(part); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the index's temporary file was created before any download (stat: %v)", err)
	}
	if u, err := c.Usage(ctx); err != nil || u != 0 {
		t.Fatalf("usage %d (%v) before any download, want 0: nothing reserved yet", u, err)
	}
	d, err := c.Add(ctx, &Source{Bucket: mb, Backoff: func(int) time.Duration { return time.Millisecond },
		Shards: []Shard{{Files: []File{{Raw: "ds/a.mds", RawBytes: int64(len(data))}}}}})
	if err != nil {
		t.Fatal(err)
	}
	lctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	l, err := d.Acquire(lctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "ds", "index.json"))
	if err != nil || !bytes.Equal(got, index) {
		t.Fatalf("index after the first download: %q (%v), want %q", got, err, index)
	}
	if !d.Present(0) {
		t.Fatal("shard not in place after its Acquire")
	}

	// A cache with no download at all: written behindDelay later.
	dir2 := t.TempDir()
	c2, err := Open(ctx, dir2, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	wait, err = c2.WriteFileBehind("ds/index.json", index)
	if err != nil {
		t.Fatal(err)
	}
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(dir2, "ds", "index.json")); err != nil || !bytes.Equal(got, index) {
		t.Fatalf("index written without a download: %q (%v), want %q", got, err, index)
	}
}
