package filestore_test

import (
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/filestore"
	"github.com/sluicedata/sluice/storage/storagetest"
)

func newBucket(t *testing.T) *filestore.Bucket {
	t.Helper()
	b, err := filestore.New(filepath.Join(t.TempDir(), "root"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func TestConformance(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Bucket { return newBucket(t) })
}

func TestKeysCannotEscapeRoot(t *testing.T) {
	base := t.TempDir()
	secret := filepath.Join(base, "secret")
	if err := os.WriteFile(secret, []byte("do not read"), 0o600); err != nil {
		t.Fatal(err)
	}
	rootDir := filepath.Join(base, "root")
	if err := os.MkdirAll(rootDir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Links inside the root that lead out of it.
	if err := os.Symlink(secret, filepath.Join(rootDir, "abs-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../secret", filepath.Join(rootDir, "rel-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..", filepath.Join(rootDir, "up")); err != nil {
		t.Fatal(err)
	}
	b, err := filestore.New(rootDir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := t.Context()
	for _, key := range []string{"abs-link", "rel-link", "up/secret", "../secret", "a/../../secret"} {
		if _, err := b.Stat(ctx, key); err == nil {
			t.Errorf("Stat(%q) reached outside the root", key)
		}
		r, err := b.NewRangeReader(ctx, key, 0, -1)
		if err == nil {
			r.Close()
			t.Errorf("NewRangeReader(%q) reached outside the root", key)
		} else if !strings.Contains(key, "..") && (!errors.Is(err, storage.ErrPermission) || storage.IsRetryable(err)) {
			// Refused for good: the retry decorator once retried it
			// for minutes, as an error it did not know.
			t.Errorf("NewRangeReader(%q): %v, want storage.ErrPermission, not retryable", key, err)
		}
	}
	// Writing or deleting a link replaces or removes the link itself,
	// inside the root; a key through a link out of the root fails.
	for _, key := range []string{"abs-link", "rel-link", "up/secret"} {
		w, err := b.NewWriter(ctx, key, nil)
		if err == nil {
			_, _ = w.Write([]byte("overwritten"))
			err = w.Close()
		}
		if key == "up/secret" && err == nil {
			t.Errorf("writing %q succeeded", key)
		}
		if err := b.Delete(ctx, key); key == "up/secret" && err == nil {
			t.Errorf("Delete(%q) succeeded", key)
		}
	}
	if got, _ := os.ReadFile(secret); string(got) != "do not read" {
		t.Errorf("file outside the root changed to %q", got)
	}
	if keys := storagetest.ListKeys(t, b, ""); len(keys) != 0 {
		t.Errorf("List reports %v; links out of the root must not appear", keys)
	}
}

func TestTempFilesInvisible(t *testing.T) {
	b := newBucket(t)
	storagetest.Put(t, b, "d/k", []byte("x"))
	w, err := b.NewWriter(t.Context(), "d/pending", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("partial")); err != nil {
		t.Fatal(err)
	}
	// The temporary file exists on disk but is no object.
	entries, _ := os.ReadDir(filepath.Join(b.Dir(), "d"))
	if len(entries) != 2 {
		t.Fatalf("directory holds %d entries, want the object and a temp file", len(entries))
	}
	if diff := cmp.Diff([]string{"d/k"}, storagetest.ListKeys(t, b, "")); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
	for _, e := range entries {
		if storage.IsTempName(e.Name()) {
			if _, err := b.Stat(t.Context(), "d/"+e.Name()); !errors.Is(err, storage.ErrInvalidKey) {
				t.Errorf("Stat of the temp file = %v, want ErrInvalidKey", err)
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"d/k", "d/pending"}, storagetest.ListKeys(t, b, "")); diff != "" {
		t.Errorf("List after Close (-want +got):\n%s", diff)
	}
}

func TestDeleteRemovesEmptyDirs(t *testing.T) {
	b := newBucket(t)
	storagetest.Put(t, b, "a/b/c/d", []byte("x"))
	storagetest.Put(t, b, "a/keep", []byte("x"))
	if err := b.Delete(t.Context(), "a/b/c/d"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(b.Dir(), "a", "b")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("empty directory a/b left behind: %v", err)
	}
	if _, err := os.Stat(filepath.Join(b.Dir(), "a", "keep")); err != nil {
		t.Errorf("sibling removed: %v", err)
	}
}

func TestMissingRoot(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "not", "yet")
	b, err := filestore.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := t.Context()
	if _, err := b.Stat(ctx, "k"); !errors.Is(err, storage.ErrNotExist) {
		t.Errorf("Stat in a missing root = %v, want ErrNotExist", err)
	}
	if keys := storagetest.ListKeys(t, b, ""); len(keys) != 0 {
		t.Errorf("List in a missing root = %v", keys)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Error("reading created the root")
	}
	storagetest.Put(t, b, "k", []byte("x"))
	if _, err := os.Stat(filepath.Join(dir, "k")); err != nil {
		t.Errorf("first write did not create the root: %v", err)
	}
}

func TestNewRejectsFile(t *testing.T) {
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := filestore.New(f); err == nil {
		t.Error("New on a file succeeded")
	}
}

func TestOpenURLs(t *testing.T) {
	dir := t.TempDir()
	tests := []struct{ raw, want string }{
		{dir, dir},
		{"file://" + dir, dir},
		{"file://localhost" + dir, dir},
	}
	for _, tt := range tests {
		u, err := storage.ParseURL(tt.raw)
		if err != nil {
			t.Fatal(err)
		}
		b, err := filestore.Open(context.Background(), u)
		if err != nil {
			t.Fatalf("Open(%q): %v", tt.raw, err)
		}
		if got := b.(*filestore.Bucket).Dir(); got != tt.want {
			t.Errorf("Open(%q) root = %q, want %q", tt.raw, got, tt.want)
		}
		want := (&url.URL{Scheme: "file", Path: dir + "/k"}).String()
		if got := b.URL("k"); got != want {
			t.Errorf("URL = %q, want %q", got, want)
		}
		b.Close()
	}
}

func BenchmarkFilestore(b *testing.B) {
	bkt, err := filestore.New(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer bkt.Close()
	storagetest.RunBenchmarks(b, bkt)
}

// FuzzKeysStayInRoot writes, reads and deletes arbitrary keys: each either
// fails or touches only files below the root.
func FuzzKeysStayInRoot(f *testing.F) {
	for _, k := range []string{"a", "a/b", "../x", "a/../../x", "/etc/passwd", "a//b", ".", "x/./y", "\x00", "..\\x", "a/.sluice-tmp-1"} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, key string) {
		base := t.TempDir()
		b, err := filestore.New(filepath.Join(base, "root"))
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		ctx := context.Background()
		w, err := b.NewWriter(ctx, key, nil)
		if err == nil {
			_, _ = w.Write([]byte("x"))
			err = w.Close()
		}
		if err == nil {
			if storage.ValidateKey(key) != nil {
				t.Errorf("wrote invalid key %q", key)
			}
			if got := storagetest.Get(t, b, key); string(got) != "x" {
				t.Errorf("read back %q", got)
			}
			if err := b.Delete(ctx, key); err != nil {
				t.Errorf("Delete(%q): %v", key, err)
			}
		}
		entries, err := os.ReadDir(base)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.Name() != "root" {
				t.Errorf("key %q created %s outside the root", key, e.Name())
			}
		}
	})
}
