package cache_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sluicedata/sluice/cache"
)

// TestAddReconcileLayouts checks registration's single pass over the
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
			write("elsewhere/y", 13)                // after Open: counted by Add
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
