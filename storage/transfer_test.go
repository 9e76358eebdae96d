package storage_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/memstore"
	"github.com/sluicedata/sluice/storage/storagetest"
)

func TestDownloadMemoryIsFlat(t *testing.T) {
	const size = 32 << 20
	m := memstore.New("b")
	storagetest.Put(t, m, "big", bytes.Repeat(storagetest.Pattern(1, 1<<20), size>>20))
	dst := filepath.Join(t.TempDir(), "big")
	for _, opts := range []*storage.DownloadOptions{
		{NoSync: true, PartSize: size},                    // one stream
		{NoSync: true, PartSize: 4 << 20, Concurrency: 8}, // parallel parts
	} {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if _, err := storage.Download(t.Context(), m, "big", dst, opts); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		// The copy buffers are pooled; allow them and bookkeeping, far
		// below the object's size.
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8<<20 {
			t.Errorf("Download of %d MiB allocated %d KiB (parts %d)", size>>20, alloc>>10, opts.PartSize)
		}
	}
}

func TestDownloadOptionsValidated(t *testing.T) {
	m := memstore.New("b")
	for _, o := range []storage.DownloadOptions{{Size: -1}, {PartSize: -1}, {Concurrency: -1}} {
		if _, err := storage.Download(t.Context(), m, "k", filepath.Join(t.TempDir(), "x"), &o); err == nil {
			t.Errorf("Download accepted %+v", o)
		}
	}
}

func TestDownloadTruncatedBodyLeavesNothing(t *testing.T) {
	m := memstore.New("b")
	storagetest.Put(t, m, "k", storagetest.Pattern(2, 100_000))
	f := storagetest.NewFaulty(m)
	f.Inject(storagetest.Fault{Op: storagetest.OpRead, AfterBytes: 1234, Truncate: true})
	dir := t.TempDir()
	_, err := storage.Download(t.Context(), f, "k", filepath.Join(dir, "k"), nil)
	if err == nil || !strings.Contains(err.Error(), "truncated") || !storage.IsRetryable(err) {
		t.Errorf("Download of a truncated body = %v, want a retryable truncation error", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("left %d files", len(entries))
	}
}

func TestIsTempName(t *testing.T) {
	for name, want := range map[string]bool{
		".shard.mds" + storage.TempMarker + "123": true,
		"shard.mds":              false,
		".hidden":                false,
		"x" + storage.TempMarker: false,
	} {
		if got := storage.IsTempName(name); got != want {
			t.Errorf("IsTempName(%q) = %v", name, got)
		}
	}
}

func fill(t *testing.T, b storage.Bucket, keys ...string) map[string][]byte {
	t.Helper()
	want := map[string][]byte{}
	for i, k := range keys {
		want[k] = storagetest.Pattern(uint64(i), 1000*i+7)
		storagetest.Put(t, b, k, want[k])
	}
	return want
}

func TestCopyTree(t *testing.T) {
	src := memstore.New("src")
	want := fill(t, src, "ds/index.json", "ds/shard.00000.mds", "ds/shard.00001.mds", "ds/sub/index.json", "ds/sub/shard.00000.mds", "other/x")
	dst := memstore.New("dst")
	var mu sync.Mutex
	var order []string
	var progress int64
	stats, err := storage.CopyTree(t.Context(), src, dst, &storage.CopyTreeOptions{
		SrcPrefix:   "ds/",
		DstPrefix:   "copy/",
		Concurrency: 3,
		Progress:    func(n int64) { mu.Lock(); progress += n; mu.Unlock() },
		OnObject:    func(info storage.ObjectInfo, _ bool) { mu.Lock(); order = append(order, info.Key); mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for k, v := range want {
		if !strings.HasPrefix(k, "ds/") {
			continue
		}
		total += int64(len(v))
		if got := storagetest.Get(t, dst, "copy/"+k[3:]); !bytes.Equal(got, v) {
			t.Errorf("%s: wrong content", k)
		}
	}
	if stats.Objects != 5 || stats.Bytes != total || progress != total {
		t.Errorf("stats %+v, progress %d; want 5 objects, %d bytes", stats, progress, total)
	}
	// Index files come after every shard.
	if len(order) != 5 || !storage.IsIndexKey(order[3]) || !storage.IsIndexKey(order[4]) {
		t.Errorf("copy order %v: index files not last", order)
	}
	if keys := storagetest.ListKeys(t, dst, "copy/other"); len(keys) != 0 {
		t.Errorf("copied outside the prefix: %v", keys)
	}

	// A second run with SkipExisting copies nothing.
	stats, err = storage.CopyTree(t.Context(), src, dst, &storage.CopyTreeOptions{SrcPrefix: "ds/", DstPrefix: "copy/", SkipExisting: true})
	if err != nil || stats.Objects != 0 || stats.Skipped != 5 {
		t.Errorf("resumed copy: %+v, %v", stats, err)
	}
}

func TestCopyTreeFailureKeepsIndexBack(t *testing.T) {
	src := memstore.New("src")
	fill(t, src, "index.json", "shard.00000.mds", "shard.00001.mds", "shard.00002.mds")
	f := storagetest.NewFaulty(src)
	f.Inject(storagetest.Fault{Op: storagetest.OpRead, Key: "shard.00001", AfterBytes: 10, Err: errors.New("disk on fire")})
	dst := memstore.New("dst")
	_, err := storage.CopyTree(t.Context(), f, dst, &storage.CopyTreeOptions{Concurrency: 1})
	if err == nil || !strings.Contains(err.Error(), "disk on fire") || !strings.Contains(err.Error(), "shard.00001.mds") {
		t.Fatalf("CopyTree = %v", err)
	}
	for _, k := range []string{"index.json", "shard.00001.mds"} {
		if ok, _ := storage.Exists(t.Context(), dst, k); ok {
			t.Errorf("%s appeared although the copy failed", k)
		}
	}
}

func TestCopySizeMismatch(t *testing.T) {
	src := memstore.New("src")
	storagetest.Put(t, src, "k", []byte("12345"))
	dst := memstore.New("dst")
	for _, size := range []int64{4, 6} {
		if _, err := storage.Copy(t.Context(), src, "k", dst, "k", size, nil); err == nil {
			t.Errorf("Copy with expected size %d succeeded", size)
		}
		if ok, _ := storage.Exists(t.Context(), dst, "k"); ok {
			t.Errorf("object of the wrong size appeared (expected %d)", size)
		}
	}
	if n, err := storage.Copy(t.Context(), src, "k", dst, "k2", -1, nil); err != nil || n != 5 {
		t.Errorf("Copy = %d, %v", n, err)
	}
}

func TestCopyTreeCancelled(t *testing.T) {
	src := memstore.New("src")
	var keys []string
	for i := range 50 {
		keys = append(keys, fmt.Sprintf("s%03d", i))
	}
	fill(t, src, keys...)
	ctx, cancel := context.WithCancel(t.Context())
	var n atomic.Int32
	_, err := storage.CopyTree(ctx, src, memstore.New("dst"), &storage.CopyTreeOptions{
		Concurrency: 2,
		OnObject: func(storage.ObjectInfo, bool) {
			if n.Add(1) == 3 {
				cancel()
			}
		},
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("CopyTree after cancel = %v", err)
	}
}

func TestPublisher(t *testing.T) {
	dir := t.TempDir()
	dst := memstore.New("out")
	rec := &recorder{Bucket: dst}
	pub := storage.NewPublisher(t.Context(), rec, &storage.PublishOptions{Prefix: "train/", Concurrency: 3, RemoveLocal: true})
	var want []string
	for i := range 8 {
		name := fmt.Sprintf("shard.%05d.mds", i)
		want = append(want, "train/"+name)
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, storagetest.Pattern(uint64(i), 5000), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := pub.OnFileDone(name, path); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "index.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := pub.OnFileDone("index.json", filepath.Join(dir, "index.json")); err != nil {
		t.Fatal(err)
	}
	if err := pub.Wait(); err != nil {
		t.Fatal(err)
	}
	order := rec.written()
	if len(order) != 9 || order[8] != "train/index.json" {
		t.Errorf("upload order %v: index.json not last", order)
	}
	slices.Sort(order)
	want = append(want, "train/index.json")
	slices.Sort(want)
	if diff := cmp.Diff(want, order); diff != "" {
		t.Errorf("uploaded (-want +got):\n%s", diff)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("RemoveLocal left %d files", len(entries))
	}
}

func TestPublisherErrorIsSticky(t *testing.T) {
	dir := t.TempDir()
	f := storagetest.NewFaulty(memstore.New("out"))
	f.Inject(storagetest.Fault{Op: storagetest.OpWrite, Key: "shard.00001", Err: errors.New("quota exceeded")})
	pub := storage.NewPublisher(t.Context(), f, &storage.PublishOptions{Concurrency: 1})
	var firstErr error
	for i := range 4 {
		name := fmt.Sprintf("shard.%05d.mds", i)
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := pub.OnFileDone(name, path); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	os.WriteFile(filepath.Join(dir, "index.json"), []byte("{}"), 0o644)
	if err := pub.OnFileDone("index.json", filepath.Join(dir, "index.json")); err == nil || !strings.Contains(err.Error(), "quota exceeded") {
		t.Errorf("OnFileDone(index.json) after a failure = %v", err)
	}
	if err := pub.Wait(); err == nil || !strings.Contains(err.Error(), "quota exceeded") {
		t.Errorf("Wait = %v", err)
	}
	if ok, _ := storage.Exists(t.Context(), f, "index.json"); ok {
		t.Error("index.json uploaded although a shard failed")
	}
	// Local files stay when an upload failed (RemoveLocal is off anyway).
	if _, err := os.Stat(filepath.Join(dir, "shard.00001.mds")); err != nil {
		t.Error(err)
	}
}

// recorder records the keys whose writes completed, in order.
type recorder struct {
	storage.Bucket
	mu   sync.Mutex
	keys []string
}

func (r *recorder) written() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.keys)
}

func (r *recorder) NewWriter(ctx context.Context, key string, opts *storage.WriteOptions) (io.WriteCloser, error) {
	w, err := r.Bucket.NewWriter(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	return &recWriter{WriteCloser: w, done: func() { r.mu.Lock(); r.keys = append(r.keys, key); r.mu.Unlock() }}, nil
}

type recWriter struct {
	io.WriteCloser
	done func()
}

func (w *recWriter) Close() error {
	err := w.WriteCloser.Close()
	if err == nil {
		w.done()
	}
	return err
}
