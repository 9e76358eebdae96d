package cache_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluicedata/sluice/cache"
)

// TestAddReconcileLayouts checks registration's single pass (run by
// Reconcile) over the
// dataset's directory for the layouts it must get right: the dataset at
// the cache root and nested two levels down (the rest of the root summed
// apart, the dataset's directory once), shards behind symbolic links
// (checked at their target's size, not counted), basenames in
// subdirectories, a wrong-size file someone holds locked (kept), and
// files that appeared after the cache was opened (counted).
func TestAddReconcileLayouts(t *testing.T) {
	for _, rel := range []string{"", "a/b"} {
		t.Run("dir="+rel, func(t *testing.T) {
			ctx := context.Background()
			root := t.TempDir()
			write := func(p string, n int) {
				t.Helper()
				p = filepath.Join(root, p)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, make([]byte, n), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			exists := func(p string) bool {
				_, err := os.Lstat(filepath.Join(root, p))
				return err == nil
			}
			write("elsewhere/x", 11)
			write("elsewhere/dead.part", 50) // a dead writer's: removed, not counted
			c, err := cache.Open(ctx, root, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			src, _, datas := makeSource(t, 5, 64, true)
			src.Dir = rel
			src.Shards[4].Files[0].Raw = "sub/deep.mds" // a basename with a slash
			ds := func(p string) string { return filepath.Join(rel, p) }
			f := func(i int) cache.File { return src.Shards[i].Files[0] }
			write(ds(f(0).Raw), 64)                 // complete
			write(ds("real/0001"), 64)              // shard 1's raw file is a link to this
			write(ds(f(2).Raw), 60)                 // wrong size, but locked: kept
			write(ds(f(3).Raw), 64)                 // complete, with a compressed form
			write(ds(f(3).Zip), int(f(3).ZipBytes)) // removed (keep_zip is off)
			write(ds(f(4).Raw), 65)                 // nested, wrong size: removed
			write(ds("mine.txt"), 7)                // not the dataset's: kept, counted
			write("elsewhere/y", 13)                // after Open: counted by the pass
			if err := os.Symlink("real/0001", filepath.Join(root, ds(f(1).Raw))); err != nil {
				t.Fatal(err)
			}
			held, err := os.Open(filepath.Join(root, ds(f(2).Raw)))
			if err != nil {
				t.Fatal(err)
			}
			defer held.Close()
			if err := unix.Flock(int(held.Fd()), unix.LOCK_SH); err != nil {
				t.Fatal(err)
			}
			d, err := c.Add(ctx, src)
			if err != nil {
				t.Fatal(err)
			}
			if err := d.Reconcile(ctx); err != nil {
				t.Fatal(err)
			}
			for p, want := range map[string]bool{
				f(0).Raw: true, f(1).Raw: true, f(2).Raw: true, f(3).Raw: true,
				f(3).Zip: false, f(4).Raw: false, "mine.txt": true,
			} {
				if got := exists(ds(p)); got != want {
					t.Errorf("%s kept %v, want %v", ds(p), got, want)
				}
			}
			if exists("elsewhere/dead.part") {
				t.Error("a dead writer's temporary file was kept")
			}
			// Counted: every regular file but the link and the metadata.
			if got, want := usage(t, c), int64(11+13+64+64+60+64+7); got != want {
				t.Fatalf("usage after Add = %d, want %d", got, want)
			}
			for i, want := range []bool{true, true, false, true, false} {
				if got := d.Present(i); got != want {
					t.Errorf("shard %d present %v, want %v", i, got, want)
				}
			}
			_ = datas
		})
	}
}

// TestWriteFileFirstUseCountsOnce: with no limit, a WriteFile that is the
// Cache's first use of the byte count (no dataset registered yet) counts
// the file once. The count is rebuilt at first use; the rebuild must not
// see the write's own temporary file (created at full size) and then have
// its bytes added again.
func TestWriteFileFirstUseCountsOnce(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "old.bin"), make([]byte, 300), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := cache.Open(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.WriteFile(ctx, "ds/index.json", make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Usage(ctx); err != nil || n != 1300 {
		t.Fatalf("Usage after the first WriteFile: %d, %v; want 1300 (300 there before, 1000 written)", n, err)
	}
}

// firstRun caches every shard of src under dir, as an earlier run of the
// job would have, and closes its cache.
func firstRun(t *testing.T, dir string, src *cache.Source) {
	t.Helper()
	ctx := context.Background()
	c, err := cache.Open(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	d, err := c.Add(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	for i := range d.Len() {
		l, err := d.Acquire(ctx, i)
		if err != nil {
			t.Fatal(err)
		}
		l.Release()
	}
}

// leaseBytes leases shard i of d and returns its first file's bytes.
func leaseBytes(t *testing.T, d *cache.Dataset, i int) []byte {
	t.Helper()
	l, err := d.Acquire(context.Background(), i)
	if err != nil {
		t.Fatalf("shard %d: %v", i, err)
	}
	defer l.Release()
	b, err := os.ReadFile(l.Path(0))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRestartLeasesCachedShardsWhileTheLockIsHeld: a restarted job whose
// shards are all cached registers its dataset and leases them without the
// directory-wide lock (registration no longer reads the directory under
// it), so it starts even while another process holds that lock. Before,
// Add waited for the lock and failed after LockTimeout.
func TestRestartLeasesCachedShardsWhileTheLockIsHeld(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	src, cb, datas := makeSource(t, 3, 64, false)
	firstRun(t, dir, src)
	c, err := cache.Open(ctx, dir, &cache.Options{LockTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	lf, err := os.OpenFile(filepath.Join(dir, ".sluice", "lock"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	if err := unix.Flock(int(lf.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	d, err := c.Add(ctx, src)
	if err != nil {
		t.Fatalf("Add while another process holds the directory lock: %v", err)
	}
	for i := range 3 {
		if !bytes.Equal(leaseBytes(t, d, i), datas[i]) {
			t.Errorf("shard %d: wrong bytes", i)
		}
		if n := cb.count(src.Shards[i].Files[0].Raw); n != 1 {
			t.Errorf("shard %d downloaded %d times in all, want 1 (by the first run)", i, n)
		}
	}
	if err := unix.Flock(int(lf.Fd()), unix.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	if err := d.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := usage(t, c), dirBytes(t, dir); got != want {
		t.Errorf("usage %d after the pass, the directory holds %d", got, want)
	}
}

// TestRestartBeforeThePass: a restarted job leases shards before the
// registration's pass over the cached files has run. A cached shard
// truncated or deleted since is fetched again before it is served (never
// served short); the first reservation runs the pass (a dead writer's
// temporary file deleted, the truncated file too) and rebuilds the byte
// count, which a file copied in had left stale, before it admits a
// download: the limit holds, and the count equals the bytes on disk.
func TestRestartBeforeThePass(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	const size = 64
	src, cb, datas := makeSource(t, 5, size, false)
	firstRun(t, dir, src)
	raw := func(i int) string { return filepath.Join(dir, src.Shards[i].Files[0].Raw) }
	if err := os.Truncate(raw(1), 10); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(raw(2)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(raw(2)+".part", make([]byte, 30), 0o600); err != nil { // its writer died
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "mine.txt"), make([]byte, 100), 0o600); err != nil { // not counted
		t.Fatal(err)
	}
	// The count a run left, stale (as when the files were copied in).
	if err := os.WriteFile(filepath.Join(dir, ".sluice", "usage"), make([]byte, 8), 0o600); err != nil {
		t.Fatal(err)
	}
	limit := int64(4*size + 100)
	c, err := cache.Open(ctx, dir, &cache.Options{Limit: limit, WaitTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	stop := watchLimit(t, dir, limit)
	d, err := c.Add(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 3, 4, 1, 2} {
		if !bytes.Equal(leaseBytes(t, d, i), datas[i]) {
			t.Errorf("shard %d: wrong bytes", i)
		}
	}
	stop()
	for i, want := range []int{1, 2, 2, 1, 1} {
		if n := cb.count(src.Shards[i].Files[0].Raw); n != want {
			t.Errorf("shard %d downloaded %d times in all, want %d", i, n, want)
		}
	}
	if _, err := os.Stat(raw(2) + ".part"); err == nil {
		t.Error("a dead writer's temporary file was kept")
	}
	if c.Stats().Evictions == 0 {
		t.Error("nothing evicted: the count did not see the cached files")
	}
	if got, want := usage(t, c), dirBytes(t, dir); got != want {
		t.Errorf("usage %d, the directory holds %d", got, want)
	}
}

// TestPassRunsBehindTheFirstLeases: the registration's pass runs by
// itself shortly after Add, with no further use of the cache (a job that
// only reads cached shards still gets its dead temporary files removed
// and the node's byte count rebuilt), and another process sharing the
// cache then reads the exact count.
func TestPassRunsBehindTheFirstLeases(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	src, _, _ := makeSource(t, 3, 64, false)
	firstRun(t, dir, src)
	other, err := cache.Open(ctx, dir, nil) // another process's cache, in use
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	usage(t, other)
	dead := filepath.Join(dir, src.Shards[1].Files[0].Raw+".part")
	if err := os.WriteFile(dead, make([]byte, 500), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(dir, src.Shards[2].Files[0].Raw), 10); err != nil {
		t.Fatal(err)
	}
	c, err := cache.Open(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Add(ctx, src); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := os.Stat(dead)
		if errors.Is(err, fs.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the registration's pass did not run within 30 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := os.Stat(filepath.Join(dir, src.Shards[2].Files[0].Raw)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the truncated shard was kept: %v", err)
	}
	if got, want := usage(t, other), dirBytes(t, dir); got != want {
		t.Errorf("the other process reads %d bytes, the directory holds %d", got, want)
	}
}
