package cache_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sluicedata/sluice/cache"
)

// TestOpenAndAddScanTheDirectory checks what opening a cache and
// registering a dataset find on disk from an earlier run: nested files
// counted, the metadata directory and symbolic links not, a dead writer's
// temporary file removed and a live one's counted; a complete shard kept,
// a shard of the wrong size and a compressed form beside its complete raw
// file removed, files the index does not list (local-only data) kept.
func TestOpenAndAddScanTheDirectory(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	write := func(rel string, n int) {
		t.Helper()
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, make([]byte, n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	exists := func(rel string) bool {
		_, err := os.Lstat(filepath.Join(dir, rel))
		return err == nil
	}
	write("other/deep/er/x.bin", 100)
	write(".sluice/junk", 1000)  // metadata: not counted
	write("other/.sluice/y", 10) // not the root's metadata: counted
	write("other/dead.part", 50) // its writer is gone
	write("other/live.part", 70) // its writer holds it locked
	live, err := os.Open(filepath.Join(dir, "other/live.part"))
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if err := unix.Flock(int(live.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("deep/er/x.bin", filepath.Join(dir, "other/link")); err != nil {
		t.Fatal(err)
	}

	c, err := cache.Open(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, want := usage(t, c), int64(100+10+70); got != want {
		t.Fatalf("usage after Open = %d, want %d", got, want)
	}
	if exists("other/dead.part") || !exists("other/live.part") {
		t.Fatalf("dead writer's file kept %v, live writer's kept %v; want removed, kept", exists("other/dead.part"), exists("other/live.part"))
	}

	src, _, datas := makeSource(t, 3, 64, true)
	src.Dir = "ds"
	files := func(i int) cache.File { return src.Shards[i].Files[0] }
	write("ds/"+files(0).Raw, 64)                       // complete
	write("ds/"+files(0).Zip, int(files(0).ZipBytes))   // complete compressed form of a complete raw file
	write("ds/"+files(1).Raw, 63)                       // short: an interrupted copy
	write("ds/"+files(2).Zip, int(files(2).ZipBytes)+1) // compressed form of the wrong size
	write("ds/notes/mine.txt", 5)                       // local-only
	d, err := c.Add(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	for rel, want := range map[string]bool{
		files(0).Raw: true, files(0).Zip: false, files(1).Raw: false,
		files(2).Zip: false, "notes/mine.txt": true,
	} {
		if got := exists("ds/" + rel); got != want {
			t.Errorf("ds/%s kept %v, want %v", rel, got, want)
		}
	}
	if got, want := usage(t, c), int64(100+10+70+len(datas[0])+5); got != want {
		t.Fatalf("usage after Add = %d, want %d", got, want)
	}
}

func usage(t *testing.T, c *cache.Cache) int64 {
	t.Helper()
	n, err := c.Usage(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}
