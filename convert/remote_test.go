package convert

import (
	"context"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/memstore"
)

// recordingBucket wraps a shared memstore bucket, records the order in
// which objects become visible, and ignores Close (the test owns it).
type recordingBucket struct {
	storage.Bucket
	mu    sync.Mutex
	order []string
}

type recordingWriter struct {
	io.WriteCloser
	b   *recordingBucket
	key string
}

func (w *recordingWriter) Close() error {
	err := w.WriteCloser.Close()
	if err == nil {
		w.b.mu.Lock()
		w.b.order = append(w.b.order, w.key)
		w.b.mu.Unlock()
	}
	return err
}

func (b *recordingBucket) NewWriter(ctx context.Context, key string, opts *storage.WriteOptions) (io.WriteCloser, error) {
	w, err := b.Bucket.NewWriter(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	return &recordingWriter{WriteCloser: w, b: b, key: key}, nil
}

func (b *recordingBucket) Close() error { return nil }

func TestRemoteOutput(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	writeFile(t, in, jsonlRecords(3000))
	mem := &recordingBucket{Bucket: memstore.New("out")}
	reg := testRegistry()
	reg.Register("mem", func(_ context.Context, u *url.URL) (storage.Bucket, error) { return mem, nil })
	rep := runConvert(t, &Options{Input: in, Output: "mem://out", Registry: reg, Compression: "zstd", SizeLimit: 32 << 10})

	// Every shard became visible before index.json; the journal is gone.
	idxAt := -1
	for i, k := range mem.order {
		if k == format.IndexFile {
			idxAt = i
		}
	}
	if idxAt < 0 {
		t.Fatalf("index.json never written; order %v", mem.order)
	}
	shards := 0
	for i, k := range mem.order {
		if strings.HasPrefix(k, "shard.") {
			shards++
			if i > idxAt {
				t.Errorf("%s written after index.json", k)
			}
		}
	}
	if shards != rep.Shards {
		t.Errorf("%d shard files written, report says %d", shards, rep.Shards)
	}
	// Download and compare with a local conversion.
	local := filepath.Join(dir, "local")
	runConvert(t, &Options{Input: in, Output: local, Compression: "zstd", SizeLimit: 32 << 10})
	got := filepath.Join(dir, "downloaded")
	ctx := context.Background()
	err := mem.List(ctx, "", func(o storage.ObjectInfo) error {
		if strings.HasPrefix(o.Key, JournalDir) {
			t.Errorf("journal object %s left behind", o.Key)
		}
		b, err := storage.ReadAll(ctx, mem, o.Key, 1<<30)
		if err != nil {
			return err
		}
		p := filepath.Join(got, filepath.FromSlash(o.Key))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		return os.WriteFile(p, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	sameDataFiles(t, local, got)
	if diff := cmp.Diff(readDataset(t, local), readDataset(t, got)); diff != "" {
		t.Fatal(diff)
	}
}
