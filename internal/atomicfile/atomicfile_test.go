package atomicfile

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "index.json")
	if err := WriteFile(p, 0o600, []byte("ab"), nil, []byte("cd")); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(p, 0o644, []byte("new")); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil || !bytes.Equal(b, []byte("new")) {
		t.Fatalf("read back %q, %v", b, err)
	}
	fi, err := os.Stat(p)
	if err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("mode %v, %v", fi.Mode(), err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("directory holds %d entries, want 1", len(ents))
	}
}

// TestWriteFileFailure renames over a directory, which fails: the
// destination stays as it was and no temporary file is left.
func TestWriteFileFailure(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "taken")
	if err := os.Mkdir(p, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p, "x"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(p, 0o644, []byte("data")); err == nil {
		t.Fatal("rename over a non-empty directory succeeded")
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 || !ents[0].IsDir() {
		t.Fatalf("directory holds %v after a failed write", ents)
	}
	if err := WriteFile(filepath.Join(dir, "missing", "f"), 0o644, []byte("data")); err == nil {
		t.Fatal("write into a missing directory succeeded")
	}
}
