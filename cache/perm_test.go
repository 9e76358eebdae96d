package cache_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluicedata/sluice/cache"
)

// modes returns the permission bits (and set-group-ID) of everything
// under dir, the root included.
func modes(t *testing.T, dir string) map[string]fs.FileMode {
	t.Helper()
	m := map[string]fs.FileMode{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		fi, err := os.Stat(p)
		if err == nil {
			m[p] = fi.Mode() & (fs.ModePerm | fs.ModeSetgid | fs.ModeDir)
		}
		return nil
	})
	return m
}

// TestPermissions: by default every directory of the cache is 0700 and
// every file 0600 (shards, index copies, locks, manifests, usage); with
// SharedGroup 0770+setgid and 0660. A cache made 0755/0644 by an older
// version is tightened.
func TestPermissions(t *testing.T) {
	old := unix.Umask(0)
	defer unix.Umask(old)
	for _, shared := range []bool{false, true} {
		t.Run("shared="+strconv.FormatBool(shared), func(t *testing.T) {
			ctx := context.Background()
			dir := filepath.Join(t.TempDir(), "c")
			os.MkdirAll(filepath.Join(dir, ".sluice"), 0o755)
			os.WriteFile(filepath.Join(dir, ".sluice", "lock"), nil, 0o644)
			c, err := cache.Open(ctx, dir, &cache.Options{SharedGroup: shared})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			src, _, _ := makeSource(t, 2, 1000, true)
			src.Dir = "sub/ds"
			d, err := c.Add(ctx, src)
			if err != nil {
				t.Fatal(err)
			}
			l, err := d.Acquire(ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			l.Release()
			if err := c.WriteFile(ctx, "sub/ds/index.json", []byte("{}")); err != nil {
				t.Fatal(err)
			}
			wantDir, wantFile := fs.ModeDir|0o700, fs.FileMode(0o600)
			if shared {
				wantDir, wantFile = fs.ModeDir|fs.ModeSetgid|0o770, 0o660
			}
			files := 0
			for p, m := range modes(t, dir) {
				want := wantFile
				if m&fs.ModeDir != 0 {
					want = wantDir
				} else {
					files++
				}
				if m != want {
					t.Errorf("%s: mode %v, want %v", p, m, want)
				}
			}
			if files < 4 {
				t.Errorf("only %d files checked", files)
			}
		})
	}
}

// TestLockHolderNamed: a directory lock held by someone else is reported
// within the lock timeout, naming the holder, not after WaitTimeout.
func TestLockHolderNamed(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	c, err := cache.Open(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	// Another open file description: flock conflicts as with another
	// process, and /proc/locks names this pid.
	f, err := os.OpenFile(filepath.Join(dir, ".sluice", "lock"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, err = cache.Open(ctx, dir, &cache.Options{LockTimeout: 300 * time.Millisecond})
	if err == nil {
		t.Fatal("Open succeeded while the lock was held")
	}
	if ctx.Err() != nil {
		t.Fatalf("Open waited past the test's deadline: %v", err)
	}
	want := "held by pid " + strconv.Itoa(os.Getpid())
	if _, serr := os.Stat("/proc/locks"); serr == nil && !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
	if !strings.Contains(err.Error(), filepath.Join(dir, ".sluice", "lock")) {
		t.Errorf("error %q does not name the lock file", err)
	}
}
