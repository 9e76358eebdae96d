package cache

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicedata/sluice/storage/memstore"
)

// The idle holds' tests: 6 shards of 4 KiB in a memstore.
const (
	holdShards = 6
	holdSize   = 4096
)

func holdData(i int) []byte {
	b := make([]byte, holdSize)
	r := rand.New(rand.NewPCG(uint64(i), 11))
	for j := range b {
		b[j] = byte(r.Uint32())
	}
	return b
}

// openHold opens a cache in dir with opts and registers the 6 shards, its
// idle holds lasting about ttl. The cache is closed at the end of t.
func openHold(t *testing.T, dir string, opts *Options, ttl time.Duration) (*Cache, *Dataset) {
	t.Helper()
	mb := memstore.New("src")
	src := &Source{Bucket: mb, Backoff: func(int) time.Duration { return time.Millisecond }}
	for i := range holdShards {
		k := fmt.Sprintf("shard.%05d.mds", i)
		w, err := mb.NewWriter(context.Background(), k, nil)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(holdData(i))
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		src.Shards = append(src.Shards, Shard{Files: []File{{Raw: k, RawBytes: holdSize}}})
	}
	c, err := Open(context.Background(), dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.holds.ttl = ttl // before any hold: the sweeper reads it when it starts
	d, err := c.Add(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	return c, d
}

// warm leases and releases every shard twice (the first lease of a fetch
// reads its temporary file, which is never held) and returns the FileIDs
// of the second leases, now held idle.
func warm(t *testing.T, d *Dataset) []uint64 {
	t.Helper()
	fids := make([]uint64, holdShards)
	for range 2 {
		for i := range holdShards {
			l, err := d.Acquire(context.Background(), i)
			if err != nil {
				t.Fatal(err)
			}
			fids[i] = l.FileID()
			l.Release()
		}
	}
	d.c.mu.Lock()
	defer d.c.mu.Unlock()
	if d.c.holds.n != holdShards {
		t.Fatalf("%d idle holds after warm leases, want %d", d.c.holds.n, holdShards)
	}
	return fids
}

// child runs this test binary's TestIdleHoldChild in mode with env, and
// returns it started, with its stdout.
func child(t *testing.T, ctx context.Context, mode, dir string, env ...string) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestIdleHoldChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), append([]string{"SLUICE_HOLD_CHILD=" + mode, "SLUICE_HOLD_DIR=" + dir}, env...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, bufio.NewScanner(out)
}

// evictFrom runs a child process that opens the cache in dir with a limit
// that leaves no room for the shards and writes a file as large as all of
// them, waiting up to wait for room: it evicts every shard it can. It
// returns the evictions and whether the write got its room.
func evictFrom(t *testing.T, dir string, wait time.Duration) (evicted int, ok bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait+30*time.Second)
	defer cancel()
	cmd, out := child(t, ctx, "evict", dir, "SLUICE_HOLD_WAIT="+wait.String())
	var line string
	for out.Scan() {
		if strings.HasPrefix(out.Text(), "evicted=") {
			line = out.Text()
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	if _, err := fmt.Sscanf(line, "evicted=%d ok=%t", &evicted, &ok); err != nil {
		t.Fatalf("child said %q: %v", line, err)
	}
	return evicted, ok
}

// TestIdleHoldChild is the child process of the tests below; it runs only
// with SLUICE_HOLD_CHILD set.
func TestIdleHoldChild(t *testing.T) {
	mode, dir := os.Getenv("SLUICE_HOLD_CHILD"), os.Getenv("SLUICE_HOLD_DIR")
	if mode == "" {
		t.Skip("the child process of the idle holds' cross-process tests")
	}
	ctx := context.Background()
	switch mode {
	case "evict":
		wait, err := time.ParseDuration(os.Getenv("SLUICE_HOLD_WAIT"))
		if err != nil {
			t.Fatal(err)
		}
		c, err := Open(ctx, dir, &Options{Limit: holdShards*holdSize + 1024, WaitTimeout: wait})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		err = c.WriteFile(ctx, "filler", make([]byte, holdShards*holdSize))
		if err != nil && !errors.Is(err, ErrNoSpace) {
			t.Fatal(err)
		}
		fmt.Printf("evicted=%d ok=%t\n", c.Stats().Evictions, err == nil)
	case "hold":
		// Leases on the first half, idle holds on the rest; then wait to
		// be killed.
		_, d := openHold(t, dir, nil, time.Hour)
		for i := range holdShards {
			l, err := d.Acquire(ctx, i)
			if err != nil {
				t.Fatal(err)
			}
			if i >= holdShards/2 {
				l.Release()
			}
		}
		fmt.Println("ready")
		time.Sleep(time.Minute)
		t.Fatal("not killed")
	default:
		t.Fatalf("mode %q", mode)
	}
}

// TestIdleHoldKeepsOtherProcessesOut: another process evicting (a child
// process with a limit that needs every shard's room) finds the shards
// this one holds idle locked, as if leased, and evicts none; each taken
// again here is the same file, unchanged in its place, with no fetch.
func TestIdleHoldKeepsOtherProcessesOut(t *testing.T) {
	dir := t.TempDir()
	_, d := openHold(t, dir, nil, time.Hour)
	fids := warm(t, d)
	if evicted, ok := evictFrom(t, dir, 500*time.Millisecond); evicted != 0 || ok {
		t.Fatalf("the other process evicted %d shards held idle here (room found: %t), want none", evicted, ok)
	}
	for i := range holdShards {
		l, err := d.Acquire(context.Background(), i)
		if err != nil {
			t.Fatal(err)
		}
		if !l.Hit() || l.FileID() != fids[i] {
			t.Errorf("shard %d: hit %t, FileID %d, want a hit on the held file %d", i, l.Hit(), l.FileID(), fids[i])
		}
		fi, err := l.File().Stat()
		if err != nil {
			t.Fatal(err)
		}
		pi, err := os.Stat(l.Path(0))
		if err != nil || !os.SameFile(fi, pi) {
			t.Errorf("shard %d: the held file is no longer at %s (%v)", i, l.Path(0), err)
		}
		l.Release()
	}
}

// TestIdleHoldExpires: holds end about their TTL after the release; then
// another process evicts the shards, OnEvict is called for each, and this
// process leases them again only from a new fetch (a new FileID), never
// from the file it held.
func TestIdleHoldExpires(t *testing.T) {
	dir := t.TempDir()
	_, d := openHold(t, dir, nil, 200*time.Millisecond)
	fids := warm(t, d)
	var mu sync.Mutex
	ended := map[int]int{}
	defer d.OnEvict(func(shard int) {
		mu.Lock()
		ended[shard]++
		mu.Unlock()
	})()
	start := time.Now()
	evicted, ok := evictFrom(t, dir, 20*time.Second)
	if evicted != holdShards || !ok {
		t.Fatalf("the other process evicted %d shards (room found: %t) after the holds' TTL, want all %d", evicted, ok, holdShards)
	}
	t.Logf("evicted after %v", time.Since(start))
	mu.Lock()
	for i := range holdShards {
		if ended[i] == 0 {
			t.Errorf("shard %d: OnEvict not called at the end of its hold", i)
		}
	}
	mu.Unlock()
	for i := range holdShards {
		if d.Holds(i, fids[i]) {
			t.Errorf("shard %d: still held after its TTL", i)
		}
		l, err := d.Acquire(context.Background(), i)
		if err != nil {
			t.Fatal(err)
		}
		if l.Hit() || l.FileID() == fids[i] {
			t.Errorf("shard %d: hit %t, FileID %d (held: %d): want a fetch and a new file", i, l.Hit(), l.FileID(), fids[i])
		}
		b, err := os.ReadFile(l.Path(0))
		if err != nil || string(b) != string(holdData(i)) {
			t.Errorf("shard %d: wrong bytes after the fetch (%v)", i, err)
		}
		l.Release()
	}
}

// TestIdleHoldGivesWayToThisProcess: this process's own eviction takes a
// shard it holds idle, as it took an unleased shard before holds: the
// least recently used, at once, with OnEvict called.
func TestIdleHoldGivesWayToThisProcess(t *testing.T) {
	dir := t.TempDir()
	c, d := openHold(t, dir, &Options{Limit: (holdShards - 1) * holdSize, WaitTimeout: 2 * time.Second}, time.Hour)
	var (
		mu      sync.Mutex
		evicted = map[int]bool{}
	)
	defer d.OnEvict(func(shard int) {
		mu.Lock()
		evicted[shard] = true
		mu.Unlock()
	})()
	ctx := context.Background()
	for range 2 { // the second pass holds them idle
		for i := range holdShards - 1 {
			l, err := d.Acquire(ctx, i)
			if err != nil {
				t.Fatal(err)
			}
			l.Release()
		}
	}
	c.mu.Lock()
	held := c.holds.n
	c.mu.Unlock()
	if held != holdShards-1 || c.Stats().Evictions != 0 {
		t.Fatalf("%d holds, %d evictions: want %d, 0", held, c.Stats().Evictions, holdShards-1)
	}
	l, err := d.Acquire(ctx, holdShards-1)
	if err != nil {
		t.Fatalf("a shard that needs a held one's room: %v", err)
	}
	l.Release()
	mu.Lock()
	called := evicted[0]
	mu.Unlock()
	if c.Stats().Evictions != 1 || !called {
		t.Fatalf("%d evictions, OnEvict for shard 0: %t; want shard 0 (least recently used) evicted", c.Stats().Evictions, called)
	}
	for i := range holdShards {
		_, err := os.Stat(d.path(fmt.Sprintf("shard.%05d.mds", i)))
		if gone := errors.Is(err, os.ErrNotExist); gone != (i == 0) {
			t.Errorf("shard %d: file gone %t (%v), want only shard 0's", i, gone, err)
		}
	}
}

// TestIdleHoldsOfKilledProcess: the locks of a process killed while it
// leases shards and holds others idle go with it: before the kill they
// keep this process from evicting them, after it every shard is evicted
// at once.
func TestIdleHoldsOfKilledProcess(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The shards fetched, by a cache closed before the child starts
	// (holding nothing).
	first, d := openHold(t, dir, nil, time.Hour)
	for i := range holdShards {
		l, err := d.Acquire(ctx, i)
		if err != nil {
			t.Fatal(err)
		}
		l.Release()
	}
	first.Close()
	cmd, out := child(t, ctx, "hold", dir)
	defer cmd.Wait()
	defer cmd.Process.Kill()
	if !out.Scan() || out.Text() != "ready" {
		t.Fatalf("child: %q", out.Text())
	}
	c, err := Open(ctx, dir, &Options{Limit: holdShards*holdSize + 1024, WaitTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fill := make([]byte, holdShards*holdSize)
	if err := c.WriteFile(ctx, "filler", fill); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("room found while another process leases or holds every shard: %v", err)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("child: %v, want killed", err)
	}
	if err := c.WriteFile(ctx, "filler", fill); err != nil {
		t.Fatalf("after the holder was killed: %v", err)
	}
	if n := c.Stats().Evictions; n != holdShards {
		t.Errorf("%d shards evicted after the kill, want %d", n, holdShards)
	}
	for i := range holdShards {
		if _, err := os.Stat(fmt.Sprintf("%s/shard.%05d.mds", dir, i)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("shard %d after the kill: %v", i, err)
		}
	}
}

// TestIdleHoldFileDeletedByHand: a shard file deleted by hand while held
// (MosaicML lets a user remove a shard from local between epochs) is
// fetched again at the next lease, not served from the held file: the
// lease's path must name its file.
func TestIdleHoldFileDeletedByHand(t *testing.T) {
	_, d := openHold(t, t.TempDir(), nil, time.Hour)
	fids := warm(t, d)
	p := d.path("shard.00000.mds")
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	l, err := d.Acquire(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if l.Hit() || l.FileID() == fids[0] {
		t.Errorf("hit %t, FileID %d (held: %d): want a fetch and a new file", l.Hit(), l.FileID(), fids[0])
	}
	if b, err := os.ReadFile(p); err != nil || string(b) != string(holdData(0)) {
		t.Errorf("the leased path after the deletion: %v", err)
	}
}
