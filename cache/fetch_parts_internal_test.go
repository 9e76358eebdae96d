package cache

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/filestore"
)

// partProbe is a bucket that records, at each GET, whether the shard's
// temporary file exists already: whether the GET waited for its
// creation.
type partProbe struct {
	storage.Bucket
	part    string // the temporary file's path
	gets    atomic.Int32
	existed atomic.Int32 // GETs that found the temporary file there
}

func (p *partProbe) NewRangeReader(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	p.gets.Add(1)
	if _, err := os.Stat(p.part); err == nil {
		p.existed.Add(1)
	}
	return p.Bucket.NewRangeReader(ctx, key, off, n)
}

// TestPartCreatedDuringDownload: in a cache without a limit, the GET of a
// shard fetched in memory starts before its temporary file is created
// (creating it is off the request's path), and the shard still ends up
// whole: read early from memory, then committed byte-exact with no
// temporary file left and its bytes counted once. Under a limit the
// admission creates the file first, as before (a recount by another
// process must see the room it holds).
//
// Without a limit the file's creation runs beside the GET, and may win the
// race to the GET's probe: a run where it did says nothing, and runs are
// repeated until one where the GET found no file (up to 50). A GET that
// waited for the file never finds none.
func TestPartCreatedDuringDownload(t *testing.T) {
	ctx := context.Background()
	data := memData()
	for _, limit := range []int64{0, 1 << 20} {
		want := int32(0) // no limit: the GET did not wait for the file
		if limit > 0 {
			want = 1
		}
		for attempt := 1; ; attempt++ {
			g, e := partRun(t, ctx, data, limit)
			if g != 1 {
				t.Fatalf("limit %d: %d GETs, want 1", limit, g)
			}
			if e == want {
				break
			}
			if limit > 0 || attempt == 50 {
				t.Fatalf("limit %d: the GET found the temporary file created: %d, want %d (%d runs)", limit, e, want, attempt)
			}
		}
	}
}

// partRun reads a shard fetched in memory through a cache with limit, and
// returns the GETs made and those that found the temporary file there.
func partRun(t *testing.T, ctx context.Context, data []byte, limit int64) (gets, existed int32) {
	t.Helper()
	dir := t.TempDir()
	probe := &partProbe{Bucket: memWith(t, data, "s.mds"), part: filepath.Join(dir, "s.mds") + partSuffix}
	c, err := Open(ctx, dir, &Options{Memory: 1 << 20, Limit: limit})
	if err != nil {
		t.Fatal(err)
	}
	d := addInMemory(t, c, probe, "s.mds", len(data))
	l, err := d.AcquireEarly(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(l.Bytes(), data) {
		t.Fatalf("limit %d: early read: %d bytes, want the shard's %d", limit, len(l.Bytes()), len(data))
	}
	if err := l.Committed(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(l.Path(0))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("limit %d: committed shard: %d bytes (%v), want %d", limit, len(got), err, len(data))
	}
	l.Release()
	if _, err := os.Stat(probe.part); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("limit %d: temporary file left after the commit (stat: %v)", limit, err)
	}
	if u, err := c.Usage(ctx); err != nil || u < int64(len(data)) || u >= 2*int64(len(data)) {
		t.Fatalf("limit %d: usage %d (%v), want the shard's %d bytes counted once (plus the manifest)", limit, u, err, len(data))
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	return probe.gets.Load(), probe.existed.Load()
}

// TestPartDeferredCrash: a process killed (SIGKILL) in the middle of a
// shard's download in a cache without a limit, its room counted and its
// temporary file created beside the download, leaves a usable cache: no
// shard in place, and the next process's cache counts nothing of it,
// deletes the temporary file and fetches the shard byte-exact.
func TestPartDeferredCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process")
	}
	if os.Getenv("SLUICE_CACHE_PARTCRASH") != "" {
		t.Skip("the child of TestPartDeferredCrash runs TestPartDeferredCrashChild")
	}
	data := memData()
	src, dir := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "s.mds"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	out := runKilledChild(t, "TestPartDeferredCrashChild", "SLUICE_CACHE_PARTCRASH="+src+string(filepath.ListSeparator)+dir)
	if _, err := os.Stat(filepath.Join(dir, "s.mds") + partSuffix); err != nil {
		t.Fatalf("the child was not killed mid-download with its temporary file created (stat: %v); output:\n%s", err, out)
	}
	checkRecovered(t, src, dir, memData())
}

// runKilledChild runs this test binary's test name in a child process
// with env added, and fails unless SIGKILL ended it (the test kills
// itself at the instant it crashes at). It returns the child's output.
func runKilledChild(t *testing.T, name, env string) []byte {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+name+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), env)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child: %v, want killed by SIGKILL; output:\n%s", err, out)
	}
	if strings.Contains(string(out), "--- SKIP") {
		t.Fatalf("child skipped:\n%s", out)
	}
	return out
}

// checkRecovered checks the cache in dir that a process crashed in while
// fetching the one-file shard s.mds (data, in the filestore src): no
// shard in place, and the next process's cache counts none of the dead
// one's bytes, fetches the shard byte-exact and leaves no temporary file.
func checkRecovered(t *testing.T, src, dir string, data []byte) {
	t.Helper()
	part := filepath.Join(dir, "s.mds") + partSuffix
	if _, err := os.Stat(filepath.Join(dir, "s.mds")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("shard in place after a crash before its rename (stat: %v)", err)
	}
	b, err := filestore.New(src)
	if err != nil {
		t.Fatal(err)
	}
	c, d := memCache(t, dir, 1<<20, b, int64(len(data)))
	ctx := context.Background()
	if u, err := c.Usage(ctx); err != nil || u != 0 {
		t.Fatalf("usage after the crash: %d, %v; want 0 (the temporary file discarded)", u, err)
	}
	l, err := d.Acquire(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	got, err := os.ReadFile(l.Path(0))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("shard after the crash: %d bytes (%v), want %d", len(got), err, len(data))
	}
	if _, err := os.Stat(part); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("temporary file left after the next fetch (stat: %v)", err)
	}
}

// stallBody delivers half of its reader, then runs onHalf (which does
// not return) instead of reading on.
type stallBody struct {
	io.ReadCloser
	left   int
	onHalf func()
}

func (s *stallBody) Read(p []byte) (int, error) {
	if s.left <= 0 {
		s.onHalf()
	}
	if len(p) > s.left {
		p = p[:s.left]
	}
	n, err := s.ReadCloser.Read(p)
	s.left -= n
	return n, err
}

// stallBucket stalls every GET's body halfway (see stallBody).
type stallBucket struct {
	storage.Bucket
	onHalf func()
}

func (b *stallBucket) NewRangeReader(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	r, err := b.Bucket.NewRangeReader(ctx, key, off, n)
	if err != nil {
		return nil, err
	}
	return &stallBody{ReadCloser: r, left: len(memData()) / 2, onHalf: b.onHalf}, nil
}

// TestPartDeferredCrashChild is TestPartDeferredCrash's child process: it
// fetches the shard in memory through a body that stalls halfway, waits
// there for the temporary file to be created beside the download, and
// kills itself.
func TestPartDeferredCrashChild(t *testing.T) {
	env := os.Getenv("SLUICE_CACHE_PARTCRASH")
	if env == "" {
		t.Skip("run by TestPartDeferredCrash")
	}
	src, dir, _ := strings.Cut(env, string(filepath.ListSeparator))
	fb, err := filestore.New(src)
	if err != nil {
		t.Fatal(err)
	}
	part := filepath.Join(dir, "s.mds") + partSuffix
	b := &stallBucket{Bucket: fb, onHalf: func() {
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if _, err := os.Stat(part); err == nil {
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {}
			}
			time.Sleep(time.Millisecond)
		}
		t.Error("the temporary file was not created during the download")
		select {} // the parent's missing-file check reports it
	}}
	_, d := memCache(t, dir, 1<<20, b, int64(len(memData())))
	d.Acquire(context.Background(), 0)
	t.Fatal("Acquire returned: the download did not stall")
}
