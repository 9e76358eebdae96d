package mmap

import (
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestMap(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte("hello world"), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Bytes()) != "hello world" || m.Len() != 11 {
		t.Fatalf("mapped %q", m.Bytes())
	}
	buf := make([]byte, 5)
	if n, err := m.ReadAt(buf, 6); n != 5 || err != nil || string(buf) != "world" {
		t.Fatalf("ReadAt: %d %v %q", n, err, buf)
	}
	if n, err := m.ReadAt(buf, 8); n != 3 || err != io.EOF {
		t.Fatalf("short ReadAt: %d %v", n, err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
	empty := filepath.Join(dir, "e")
	os.WriteFile(empty, nil, 0o644)
	if m, err := Open(empty); err != nil || len(m.Bytes()) != 0 {
		t.Fatalf("empty file: %v", err)
	}
	if _, err := Open(dir); err == nil {
		t.Fatal("mapped a directory")
	}
	if _, err := Open(filepath.Join(dir, "missing")); !os.IsNotExist(err) {
		t.Fatalf("missing file: %v", err)
	}
}
