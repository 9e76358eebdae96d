package stream_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/internal/stores"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/storagetest"
	"github.com/sluicedata/sluice/stream"
)

// TestRemoteIndexChangedETagS3: against the real S3 server, an index.json
// replaced between two opens by one of the same size is noticed by its
// ETag, even when the times cannot tell (the cached copy's mtime is moved
// past the store's, as a copy cached by the download time has it). An
// unchanged remote reopens from the cache.
func TestRemoteIndexChangedETagS3(t *testing.T) {
	rig := newS3Rig(t, 200)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	local := t.TempDir()
	open := func() (*stream.Dataset, error) {
		return stream.Open(ctx, &stream.Options{Remote: rig.remote, Local: local, Registry: stores.Default(),
			Retry: rig.retry(3), BatchSize: 8})
	}
	ds, err := open()
	if err != nil {
		t.Fatal(err)
	}
	ds.Close()
	var cached string
	filepath.WalkDir(local, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == format.IndexFile {
			cached = p
		}
		return nil
	})
	if cached == "" {
		t.Fatalf("no cached index.json under %s", local)
	}
	future := time.Now().Add(time.Hour)
	if err := os.Chtimes(cached, future, future); err != nil {
		t.Fatal(err)
	}
	ds, err = open()
	if err != nil {
		t.Fatalf("reopen of an unchanged remote: %v", err)
	}
	ds.Close()

	// Replace index.json in the store with other bytes of the same size.
	b, err := stores.Default().Open(ctx, rig.remote)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	old, err := storage.ReadAll(ctx, b, format.IndexFile, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	repl := bytes.Replace(old, []byte(`"version": 2`), []byte(`"version": 3`), 1)
	if bytes.Equal(repl, old) {
		repl = bytes.Replace(old, []byte(`"version":2`), []byte(`"version":3`), 1)
	}
	if bytes.Equal(repl, old) || len(repl) != len(old) {
		t.Fatalf("cannot alter the index keeping its size: %.200s", old)
	}
	storagetest.Put(t, b, format.IndexFile, repl)
	_, err = open()
	if !errors.Is(err, stream.ErrIndexChanged) || !strings.Contains(err.Error(), "ETag") || !strings.Contains(err.Error(), cached) {
		t.Fatalf("Open after the remote changed = %v, want ErrIndexChanged by ETag naming the cached copy", err)
	}
}
