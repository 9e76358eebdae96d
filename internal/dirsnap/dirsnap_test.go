package dirsnap

import (
	"os"
	"path/filepath"
	"testing"
)

func write(t *testing.T, p string, n int) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, make([]byte, n), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestQuiescentTreeCountsEveryFile(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "x", "a"), 100)
	write(t, filepath.Join(dir, "y", "b.part"), 20)
	write(t, filepath.Join(dir, "c"), 3)
	write(t, filepath.Join(dir, ".meta", "usage"), 1000)
	write(t, filepath.Join(dir, "x", ".meta", "kept"), 4000) // any directory so named
	if err := os.Symlink("a", filepath.Join(dir, "x", "link")); err != nil {
		t.Fatal(err)
	}
	if got := Bytes(dir, ".meta", ".part"); got != 123 {
		t.Errorf("Bytes = %d, want 123", got)
	}
	if got := Bytes(dir, "", ".part"); got != 5123 {
		t.Errorf("Bytes without a skip = %d, want 5123", got)
	}
}

// The case a plain walk gets wrong: a file counted in one directory is
// deleted, and another created where the walk goes next. measure's hook
// runs after the walk, so a file deleted there was seen but may not have
// coexisted with the rest: it must not count.
func TestDeletedDuringWalkIsNotCounted(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "x", "a"), filepath.Join(dir, "x", "b")
	write(t, a, 100)
	write(t, b, 10)
	got := measure(dir, "", ".part", func() {
		os.Remove(a)
		write(t, a, 100) // refetched: a new file, not the one seen
		write(t, filepath.Join(dir, "y", "c"), 1000)
	})
	if got != 10 {
		t.Errorf("measure = %d, want 10 (only b is known to have existed throughout)", got)
	}
}

func TestRenamedIntoPlaceCountsOnce(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "x", "s.mds")
	write(t, p+".part", 100)
	got := measure(dir, "", ".part", func() {
		if err := os.Rename(p+".part", p); err != nil {
			t.Fatal(err)
		}
	})
	if got != 100 {
		t.Errorf("measure = %d, want 100", got)
	}
}
