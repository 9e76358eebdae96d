package stream

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicedata/sluice/cache"
	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/mds"
	"github.com/sluicedata/sluice/plan"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/filestore"
)

// idleDataset writes 600 samples in shards of about 30 and opens them
// local-only, through a cache without a limit, or through a cache with
// one (1 GiB: "limited"; about 4 shards: "evicting").
func idleDataset(t *testing.T, how string) *Dataset {
	t.Helper()
	dir := t.TempDir()
	w, err := mds.NewWriter(dir, &mds.WriterOptions{Columns: map[string]string{"id": "int", "text": "str"}, SizeLimit: 400})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 600 {
		if err := w.Write(format.Sample{"id": int64(i), "text": fmt.Sprintf("sample %d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	o := &Options{Local: dir, BatchSize: 4, Shuffle: true, ShuffleBlockSize: 300}
	if how != "local" {
		fb, err := filestore.New(dir)
		if err != nil {
			t.Fatal(err)
		}
		reg := &storage.Registry{}
		reg.Register("src", func(context.Context, *url.URL) (storage.Bucket, error) { return fb, nil })
		o.Remote, o.Local, o.Registry = "src://data", t.TempDir(), reg
		o.CacheMemory = -1 // shards read from their files
		switch how {
		case "limited":
			o.CacheLimit = 1 << 30
		case "evicting":
			o.CacheLimit = 21551 + 4*400 // the index and about 4 shards
		}
	}
	d, err := Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	if d.NumShards() < 15 {
		t.Fatalf("%d shards: want many", d.NumShards())
	}
	return d
}

// readEpochOnce reads a shuffled epoch of idleDataset's 600 samples with
// one rank iterator and fails unless every sample comes exactly once.
func readEpochOnce(t *testing.T, d *Dataset) {
	t.Helper()
	ctx := context.Background()
	ep, err := d.NewEpoch(ctx, plan.World{Nodes: 1, RanksPerNode: 1}, 1)
	if err != nil {
		t.Fatal(err)
	}
	it, err := ep.RankIter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	seen := map[int64]bool{}
	for it.Next() {
		s, err := it.Sample()
		if err != nil {
			t.Fatal(err)
		}
		id := s["id"].(int64)
		if seen[id] {
			t.Fatalf("sample %d twice", id)
		}
		seen[id] = true
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 600 {
		t.Fatalf("%d samples, want 600", len(seen))
	}
}

// TestIdleShardsStayOpen checks that a shard whose last reader leaves
// stays open for the next one where nothing can evict it (a shuffled epoch
// changes shard at nearly every sample: it mapped and parsed the shard
// again each time), holding no lease while idle, and that a shuffled
// epoch still yields every sample once.
func TestIdleShardsStayOpen(t *testing.T) {
	ctx := context.Background()
	for _, how := range []string{"local", "cached", "limited"} {
		t.Run(how, func(t *testing.T) {
			d := idleDataset(t, how)
			readEpochOnce(t, d)

			first, _, err := d.table.acquire(ctx, 3, false)
			if err != nil {
				t.Fatal(err)
			}
			d.table.release(first)
			if first.lease != nil {
				t.Errorf("a released shard holds its lease")
			}
			again, hit, err := d.table.acquire(ctx, 3, false)
			if err != nil {
				t.Fatal(err)
			}
			if !hit {
				t.Errorf("shard 3 again: not a hit")
			}
			if how != "local" && again.lease == nil {
				t.Errorf("shard 3 again: no lease")
			}
			if again != first {
				t.Errorf("shard 3 taken again did not keep its open file")
			}
			d.table.release(again)
			d.table.mu.Lock()
			idle := d.table.idleLen
			d.table.mu.Unlock()
			if idle < 15 {
				t.Errorf("%d idle shards after an epoch, want every shard", idle)
			}
			d.table.closeIdle()
			d.table.mu.Lock()
			defer d.table.mu.Unlock()
			if d.table.idleLen != 0 || len(d.table.m) != 0 || d.table.idleHead != nil {
				t.Errorf("after closeIdle: %d idle, %d open", d.table.idleLen, len(d.table.m))
			}
		})
	}
}

// TestIdleShardsBounded checks the idle list's bound: the least recently
// released shard is closed first.
func TestIdleShardsBounded(t *testing.T) {
	ctx := context.Background()
	d := idleDataset(t, "local")
	n := d.NumShards()
	var opened []*openShard
	for s := range n {
		o, _, err := d.table.acquire(ctx, s, false)
		if err != nil {
			t.Fatal(err)
		}
		opened = append(opened, o)
	}
	for _, o := range opened {
		d.table.release(o)
	}
	d.table.mu.Lock()
	if d.table.idleLen != n || d.table.idleTail != opened[0] || d.table.idleHead != opened[n-1] {
		t.Errorf("idle list: %d long, want %d, oldest first out", d.table.idleLen, n)
	}
	d.table.mu.Unlock()
	// With a bound of 5, releasing the shards again keeps the last 5.
	d.table.mu.Lock()
	d.table.maxIdle = 5
	d.table.mu.Unlock()
	d.table.closeIdle()
	opened = opened[:0]
	for s := range n {
		o, _, err := d.table.acquire(ctx, s, false)
		if err != nil {
			t.Fatal(err)
		}
		opened = append(opened, o)
	}
	for _, o := range opened {
		d.table.release(o)
	}
	d.table.mu.Lock()
	defer d.table.mu.Unlock()
	if d.table.idleLen != 5 || len(d.table.m) != 5 {
		t.Errorf("%d idle, %d open, want 5", d.table.idleLen, len(d.table.m))
	}
	for s := n - 5; s < n; s++ {
		if d.table.m[s] != opened[s] {
			t.Errorf("shard %d, among the 5 most recently released, was closed", s)
		}
	}
	if got := d.idleShards.Load(); got != 5 {
		t.Errorf("the dataset counts %d idle shards, want 5", got)
	}
}

// TestIdleShardsOfCursors checks that a cursor's idle shards count in its
// dataset's total, and that closing the cursor closes them.
func TestIdleShardsOfCursors(t *testing.T) {
	ctx := context.Background()
	d := idleDataset(t, "cached")
	c := d.Cursor()
	for s := range 4 {
		o, _, err := c.table.acquire(ctx, s, false)
		if err != nil {
			t.Fatal(err)
		}
		c.table.release(o)
	}
	if got := d.idleShards.Load(); got != 4 {
		t.Errorf("the dataset counts %d idle shards of its cursor, want 4", got)
	}
	if got := c.idleShards.Load(); got != 0 {
		t.Errorf("the cursor counts %d itself, want 0 (the root counts)", got)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if got := d.idleShards.Load(); got != 0 {
		t.Errorf("%d idle shards after the cursor closed, want 0", got)
	}
}

// TestIdleShardsDroppedOnEviction reads shuffled epochs through a cache
// that holds a few shards: every sample comes once, and no idle shard
// keeps a file the cache evicted (its blocks would stay allocated past the
// cache limit).
func TestIdleShardsDroppedOnEviction(t *testing.T) {
	d := idleDataset(t, "evicting")
	for range 2 {
		readEpochOnce(t, d)
		if ev := d.cache.Stats().Evictions; ev == 0 {
			t.Fatalf("no eviction: the test needs a cache that evicts")
		}
		d.table.mu.Lock()
		idle := d.table.idleLen
		d.table.mu.Unlock()
		for _, m := range deletedMappings(t, d.cache.Dir()) {
			t.Errorf("a mapping keeps a file the cache evicted: %s", m)
		}
		if idle == 0 {
			t.Errorf("no idle shard: the cache's present shards should stay open")
		}
	}
}

// deletedMappings returns this process's mappings of deleted files under
// dir (/proc/self/maps marks them "(deleted)"): a mapping keeps a deleted
// file's blocks allocated, past the cache's limit.
func deletedMappings(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skipf("no /proc/self/maps: %v", err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, dir) && strings.HasSuffix(line, "(deleted)") {
			out = append(out, line)
		}
	}
	return out
}

// TestIdleShardsEvictedByAnotherProcess: another process sharing the
// cache (a child process with a limit that needs the room of half the
// shards) evicts shards this one keeps open idle after an epoch. It can
// only once this process's cache no longer holds them (their idle holds
// end about a second after their last use), and then no mapping here
// keeps a file it deleted; the next epoch reads every sample once.
func TestIdleShardsEvictedByAnotherProcess(t *testing.T) {
	ctx := context.Background()
	d := idleDataset(t, "cached")
	readEpochOnce(t, d)
	d.table.mu.Lock()
	idle := d.table.idleLen
	d.table.mu.Unlock()
	if idle == 0 {
		t.Fatal("no idle shard after an epoch")
	}
	u, err := d.cache.Usage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, os.Args[0], "-test.run=^TestIdleEvictorChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), "SLUICE_IDLE_EVICT_DIR="+d.cache.Dir(),
		"SLUICE_IDLE_EVICT_LIMIT="+strconv.FormatInt(u, 10), "SLUICE_IDLE_EVICT_FILL="+strconv.FormatInt(u/2, 10))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var evicted int
	for _, line := range strings.Split(string(out), "\n") {
		if n, ok := strings.CutPrefix(line, "evicted="); ok {
			evicted, _ = strconv.Atoi(n)
		}
	}
	if evicted == 0 {
		t.Fatalf("the other process evicted nothing:\n%s", out)
	}
	deadline := time.Now().Add(5 * time.Second)
	for m := deletedMappings(t, d.cache.Dir()); len(m) > 0; m = deletedMappings(t, d.cache.Dir()) {
		if time.Now().After(deadline) {
			t.Fatalf("%d mappings keep files another process evicted, e.g. %s", len(m), m[0])
		}
		time.Sleep(10 * time.Millisecond)
	}
	readEpochOnce(t, d)
}

// TestIdleEvictorChild is TestIdleShardsEvictedByAnotherProcess's child
// process; it runs only with SLUICE_IDLE_EVICT_DIR set: it opens the
// cache there with the limit given and writes a file of the size given,
// waiting for room up to 20 s, and prints its evictions.
func TestIdleEvictorChild(t *testing.T) {
	dir := os.Getenv("SLUICE_IDLE_EVICT_DIR")
	if dir == "" {
		t.Skip("a child process of TestIdleShardsEvictedByAnotherProcess")
	}
	limit, err1 := strconv.ParseInt(os.Getenv("SLUICE_IDLE_EVICT_LIMIT"), 10, 64)
	fill, err2 := strconv.ParseInt(os.Getenv("SLUICE_IDLE_EVICT_FILL"), 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c, err := cache.Open(ctx, dir, &cache.Options{Limit: limit, WaitTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.WriteFile(ctx, "filler", make([]byte, fill)); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("evicted=%d\n", c.Stats().Evictions)
}
