package cache

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/filestore"
)

// memData is a shard whose size is not a whole number of pages, so that
// a direct write leaves a tail to the page cache.
func memData() []byte {
	return bytes.Repeat([]byte("sluice-in-memory-"), 5000) // 85,000 bytes
}

// memCache opens a cache in dir holding up to limit bytes of shards in
// memory, and registers data as the one-file shard s.mds of b.
func memCache(t *testing.T, dir string, limit int64, b storage.Bucket, size int64, shards ...string) (*Cache, *Dataset) {
	t.Helper()
	c, err := Open(context.Background(), dir, &Options{Memory: limit})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if len(shards) == 0 {
		shards = []string{"s.mds"}
	}
	src := &Source{Bucket: b, Backoff: func(int) time.Duration { return time.Millisecond },
		InMemory: func(int) bool { return true }}
	for _, k := range shards {
		src.Shards = append(src.Shards, Shard{Files: []File{{Raw: k, RawBytes: size}}})
	}
	d, err := c.Add(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	return c, d
}

// memUsed returns the bytes of the blocks read or kept (not free for
// reuse).
func memUsed(c *Cache) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.mem.used
	for _, b := range c.mem.free {
		n -= int64(len(b))
	}
	return n
}

// TestMemShardReadFromMemory: a shard fetched in memory is leased with
// its bytes (Lease.Bytes), written to its file whole (the pages directly,
// the tail through the page cache), and its memory is given back once
// the lease is released.
func TestMemShardReadFromMemory(t *testing.T) {
	ctx := context.Background()
	data := memData()
	c, d := memCache(t, t.TempDir(), 1<<20, memWith(t, data, "s.mds"), int64(len(data)))
	var direct atomic.Int64
	c.directHook = func(f *os.File, b []byte) error {
		direct.Add(int64(len(b)))
		_, err := f.WriteAt(b, 0)
		return err
	}
	l, err := d.AcquireEarly(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(l.Bytes(), data) {
		t.Fatalf("Lease.Bytes: %d bytes, want the shard's %d", len(l.Bytes()), len(data))
	}
	if err := l.Committed(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(l.Path(0))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("file in place: %d bytes (%v), want the shard's %d", len(got), err, len(data))
	}
	if want := int64(len(data)) &^ (directAlign - 1); direct.Load() != want {
		t.Fatalf("%d bytes written directly, want the whole pages: %d", direct.Load(), want)
	}
	if memUsed(c) == 0 {
		t.Fatal("no memory counted while the lease reads it")
	}
	l.Release()
	if n := memUsed(c); n != 0 {
		t.Fatalf("%d bytes of memory counted after the only lease was released, want 0", n)
	}
	// The next lease reads the file.
	l, err = d.Acquire(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if l.Bytes() != nil {
		t.Fatal("a lease after the shard was read has its bytes in memory; want the file")
	}
	l.Release()
	c.Close()
	if c.mem.used != 0 || len(c.mem.free) != 0 {
		t.Fatalf("%d bytes in %d free blocks after Close, want none", c.mem.used, len(c.mem.free))
	}
}

// TestMemShardNoDirectFallback: where the file system refuses direct I/O
// (EINVAL, as tmpfs did) the shard is written through the page cache,
// whole and correct.
func TestMemShardNoDirectFallback(t *testing.T) {
	ctx := context.Background()
	data := memData()
	c, d := memCache(t, t.TempDir(), 1<<20, memWith(t, data, "s.mds"), int64(len(data)))
	var calls atomic.Int32
	c.directHook = func(f *os.File, b []byte) error {
		calls.Add(1)
		// Half written, then refused: the fallback rewrites it all.
		f.WriteAt(b[:len(b)/2], 0)
		return &fs.PathError{Op: "write", Path: f.Name(), Err: syscall.EINVAL}
	}
	l, err := d.Acquire(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if calls.Load() != 1 {
		t.Fatalf("direct write tried %d times, want 1", calls.Load())
	}
	got, err := os.ReadFile(l.Path(0))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("file after the fallback: %d bytes (%v), want the shard's %d", len(got), err, len(data))
	}
}

// TestMemShardWriteFailure: a direct write that fails (not a refusal)
// fails the fetch: nothing is renamed into place, the temporary file is
// removed, its room and memory are given back, and the next Acquire
// downloads the shard again.
func TestMemShardWriteFailure(t *testing.T) {
	ctx := context.Background()
	data := memData()
	c, d := memCache(t, t.TempDir(), 1<<20, memWith(t, data, "s.mds"), int64(len(data)))
	c.directHook = func(f *os.File, b []byte) error {
		f.WriteAt(b[:len(b)/2], 0)
		return &fs.PathError{Op: "write", Path: f.Name(), Err: syscall.EIO}
	}
	if _, err := d.Acquire(ctx, 0); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Acquire with a failing write: %v, want EIO", err)
	}
	if _, err := os.Stat(d.path("s.mds")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("shard in place after its write failed (stat: %v)", err)
	}
	if _, err := os.Stat(d.path("s.mds") + partSuffix); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("temporary file left after the write failed (stat: %v)", err)
	}
	if n := memUsed(c); n != 0 {
		t.Fatalf("%d bytes of memory counted after the fetch failed, want 0", n)
	}
	if u, err := c.Usage(ctx); err != nil || u != 0 {
		t.Fatalf("usage after the failure: %d, %v; want 0", u, err)
	}
	c.directHook = nil
	l, err := d.Acquire(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	got, err := os.ReadFile(l.Path(0))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("file after the retry: %d bytes (%v), want the shard's %d", len(got), err, len(data))
	}
}

// TestMemShardBounded: shards are held in memory only within
// Options.Memory: with room for one, a second shard fetched while the
// first is read goes through its file, and the count never passes the
// limit.
func TestMemShardBounded(t *testing.T) {
	ctx := context.Background()
	data := memData()
	limit := int64(len(data)) + 2*directAlign // one shard's block, not two
	c, d := memCache(t, t.TempDir(), limit, memWith(t, data, "a.mds", "b.mds"), int64(len(data)), "a.mds", "b.mds")
	a, err := d.AcquireEarly(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release()
	if a.Bytes() == nil {
		t.Fatal("the first shard is not held in memory")
	}
	b, err := d.AcquireEarly(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()
	if b.Bytes() != nil {
		t.Fatal("the second shard is held in memory past the limit")
	}
	if n := memUsed(c); n > limit {
		t.Fatalf("%d bytes of memory counted, limit %d", n, limit)
	}
	got, err := os.ReadFile(b.ReadPath(0))
	if errors.Is(err, fs.ErrNotExist) {
		if err = b.Committed(ctx); err == nil {
			got, err = os.ReadFile(b.Path(0))
		}
	}
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("second shard's file: %d bytes (%v), want %d", len(got), err, len(data))
	}
}

// TestMemShardCrash kills a process (SIGKILL) whose fetch has written a
// shard in memory and directly to its temporary file but not renamed it:
// the cache it leaves holds no shard, and the next process removes the
// temporary file and downloads the shard whole.
func TestMemShardCrash(t *testing.T) {
	if os.Getenv("SLUICE_CACHE_MEMCRASH") != "" {
		t.Skip("the child of TestMemShardCrash runs TestMemShardCrashChild")
	}
	src, dir := t.TempDir(), t.TempDir()
	data := memData()
	if err := os.WriteFile(filepath.Join(src, "s.mds"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	out := runKilledChild(t, "TestMemShardCrashChild", "SLUICE_CACHE_MEMCRASH="+src+string(filepath.ListSeparator)+dir)
	part := filepath.Join(dir, "s.mds") + partSuffix
	if fi, err := os.Stat(part); err != nil || fi.Size() != int64(len(data)) {
		t.Fatalf("the child did not reach its commit: temporary file %v, %v; output:\n%s", fi, err, out)
	}
	checkRecovered(t, src, dir, data)
}

// TestMemShardCrashChild is TestMemShardCrash's child process: it fetches
// the shard in memory and kills itself before the commit.
func TestMemShardCrashChild(t *testing.T) {
	env := os.Getenv("SLUICE_CACHE_MEMCRASH")
	if env == "" {
		t.Skip("run by TestMemShardCrash")
	}
	src, dir, _ := strings.Cut(env, string(filepath.ListSeparator))
	b, err := filestore.New(src)
	if err != nil {
		t.Fatal(err)
	}
	size := int64(len(memData()))
	c, d := memCache(t, dir, 1<<20, b, size)
	c.beforeCommit = func(int) {
		// The bytes are in the temporary file (direct and tail).
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
	d.Acquire(context.Background(), 0)
	t.Fatal("Acquire returned: the fetch did not reach its commit")
}

// TestMemShardBlockReused: the block of a shard read and released is
// reused by the next shard of about the same size (no fresh memory, whose
// page faults cost more than the copy into it), and the count of memory
// does not grow.
func TestMemShardBlockReused(t *testing.T) {
	ctx := context.Background()
	data := memData()
	c, d := memCache(t, t.TempDir(), 1<<20, memWith(t, data, "a.mds", "b.mds"), int64(len(data)), "a.mds", "b.mds")
	a, err := d.AcquireEarly(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	first := &a.Bytes()[0]
	if err := a.Committed(ctx); err != nil {
		t.Fatal(err)
	}
	a.Release()
	c.mu.Lock()
	used := c.mem.used
	c.mu.Unlock()
	b, err := d.AcquireEarly(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()
	if !bytes.Equal(b.Bytes(), data) {
		t.Fatalf("second shard: %d bytes in memory, want its %d", len(b.Bytes()), len(data))
	}
	if &b.Bytes()[0] != first {
		t.Fatal("the second shard got a fresh block, not the first one's")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mem.used != used {
		t.Fatalf("memory counted: %d after the reuse, %d before", c.mem.used, used)
	}
}

// TestMemShardLongerObject: an object longer than the index says is
// corrupt (not retried, nothing in place), in memory as through a file.
func TestMemShardLongerObject(t *testing.T) {
	ctx := context.Background()
	data := memData()
	c, d := memCache(t, t.TempDir(), 1<<20, memWith(t, data, "s.mds"), int64(len(data))-10)
	_, err := d.Acquire(ctx, 0)
	if !errors.Is(err, format.ErrCorrupt) {
		t.Fatalf("Acquire of a longer object: %v, want format.ErrCorrupt", err)
	}
	if _, err := os.Stat(d.path("s.mds")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("shard in place after a size mismatch (stat: %v)", err)
	}
	if n := memUsed(c); n != 0 {
		t.Fatalf("%d bytes of memory counted after the failure, want 0", n)
	}
	if got := c.Stats().Downloads; got != 0 {
		t.Fatalf("%d downloads counted for a corrupt object", got)
	}
}

// TestFillBlock: a reader that ends within the block fills it to there; one
// with more than the block holds reports one byte more.
func TestFillBlock(t *testing.T) {
	b := make([]byte, 10)
	if n, err := fillBlock(b, bytes.NewReader([]byte("abcdef"))); n != 6 || err != nil || string(b[:6]) != "abcdef" {
		t.Fatalf("short reader: %d, %v, %q", n, err, b[:n])
	}
	if n, err := fillBlock(b, bytes.NewReader([]byte("0123456789"))); n != 10 || err != nil {
		t.Fatalf("exact reader: %d, %v", n, err)
	}
	if n, err := fillBlock(b, bytes.NewReader([]byte("0123456789X"))); n != 11 || err != nil {
		t.Fatalf("longer reader: %d, %v; want 11, nil", n, err)
	}
}
