package cache

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicedata/sluice/storage"
)

// heldBody is a bucket whose GET bodies say on reading when their first
// Read comes and wait for release before giving any byte.
type heldBody struct {
	storage.Bucket
	reading chan struct{} // closed at the first Read
	release chan struct{}
}

func (h *heldBody) NewRangeReader(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	r, err := h.Bucket.NewRangeReader(ctx, key, off, n)
	if err != nil {
		return nil, err
	}
	return &heldReader{ReadCloser: r, h: h}, nil
}

type heldReader struct {
	io.ReadCloser
	h      *heldBody
	waited bool
}

func (r *heldReader) Read(p []byte) (int, error) {
	if !r.waited {
		r.waited = true
		close(r.h.reading)
		select {
		case <-r.h.release:
		case <-time.After(time.Minute):
			return 0, errors.New("heldBody: not released in a minute")
		}
	}
	return r.ReadCloser.Read(p)
}

// TestWritesBehindAfterFirstLanding: in a cache without a limit, the
// writes behind of an index (WriteFileBehind) and of a dataset's manifest
// do not run beside the first download of a shard fetched in memory: none
// of their files is created while its body is read (held here for a
// while), and both are written once its bytes are in, the shard's commit
// after them. Before, they began with the download (the index) or at the
// dataset's registration (the manifest), and their file creations and
// syncs slowed the first shard's GET.
//
// What it cannot tell: that nothing is written during the download is
// watched for a bounded time (the body is held 1.5 s; before, both files
// appeared within milliseconds).
func TestWritesBehindAfterFirstLanding(t *testing.T) {
	ctx := context.Background()
	data := bytes.Repeat([]byte("sluice-landing-"), 3000)
	dir := t.TempDir()
	hb := &heldBody{Bucket: memWith(t, data, "ds/a.mds"), reading: make(chan struct{}), release: make(chan struct{})}
	c, err := Open(ctx, dir, &Options{Memory: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.behind.mu.Lock()
	c.behind.delay = time.Hour // what is watched is the download, not the fallback delay
	c.behind.mu.Unlock()
	index := []byte(`{"version": 2, "shards": []}`)
	wait, err := c.WriteFileBehind("ds/index.json", index)
	if err != nil {
		t.Fatal(err)
	}
	d := addInMemory(t, c, hb, "ds/a.mds", len(data))
	done, fetchErr := d.Prefetch(0, 1)
	select {
	case <-hb.reading:
	case <-time.After(time.Minute):
		t.Fatal("the shard's body was not read in a minute")
	}
	// While the body is held: neither write has created a file.
	written := func() []string {
		var got []string
		idx := filepath.Join(dir, "ds", "index.json")
		for _, p := range []string{idx, idx + partSuffix} {
			if _, err := os.Stat(p); err == nil {
				got = append(got, p)
			}
		}
		ents, err := os.ReadDir(filepath.Dir(d.manifestPath()))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		for _, e := range ents {
			got = append(got, e.Name())
		}
		return got
	}
	for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if got := written(); len(got) > 0 {
			close(hb.release)
			t.Fatalf("written beside the first shard's download: %v", got)
		}
	}
	close(hb.release)
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("the fetch did not end in a minute")
	}
	if err := fetchErr(); err != nil {
		t.Fatal(err)
	}
	werr := make(chan error, 1)
	go func() { werr <- wait() }()
	select {
	case err := <-werr:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the index was not written in a minute after the download")
	}
	if got, err := os.ReadFile(filepath.Join(dir, "ds", "index.json")); err != nil || !bytes.Equal(got, index) {
		t.Fatalf("index: %q (%v), want %q", got, err, index)
	}
	if _, err := os.Stat(d.manifestPath()); err != nil {
		t.Fatalf("manifest not written after the download: %v", err)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "ds", "a.mds")); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("shard: %d bytes (%v), want %d committed", len(got), err, len(data))
	}
}
