package stream_test

import (
	"context"
	"encoding/binary"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/mds"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/memstore"
)

// spec describes a synthetic dataset: sample i has id i and a payload of
// payload bytes derived from i.
type spec struct {
	samples     int
	payload     int
	sizeLimit   int64
	compression string
	hashes      []string
}

func payload(i, n int) []byte {
	b := make([]byte, n)
	x := uint64(i)*0x9e3779b97f4a7c15 + 1
	for j := 0; j < n; j += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], x)
		copy(b[j:], w[:])
	}
	return b
}

// writeDataset writes the dataset into dir with the MDS writer.
func writeDataset(t testing.TB, dir string, s spec) {
	t.Helper()
	w, err := mds.NewWriter(dir, &mds.WriterOptions{
		Columns:     map[string]string{"id": "int", "data": "bytes"},
		SizeLimit:   s.sizeLimit,
		Compression: s.compression,
		Hashes:      s.hashes,
		ExistOK:     true,
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range s.samples {
		if err := w.Write(format.Sample{"id": int64(i), "data": payload(i, s.payload)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
}

// countingBucket counts GETs that start at offset 0, per key.
type countingBucket struct {
	storage.Bucket
	mu   sync.Mutex
	gets map[string]int
}

func (b *countingBucket) NewRangeReader(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if off == 0 {
		b.mu.Lock()
		b.gets[key]++
		b.mu.Unlock()
	}
	return b.Bucket.NewRangeReader(ctx, key, off, n)
}

// Close leaves the shared bucket open: every Dataset of a test gets it.
func (b *countingBucket) Close() error { return nil }

func (b *countingBucket) counts() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	m := make(map[string]int, len(b.gets))
	for k, v := range b.gets {
		m[k] = v
	}
	return m
}

// memDataset writes a dataset and uploads it to a memstore reachable as
// "mem://data" through the returned registry.
func memDataset(t testing.TB, s spec) (*storage.Registry, *countingBucket) {
	t.Helper()
	dir := t.TempDir()
	writeDataset(t, dir, s)
	mb := memstore.New("data")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		w, err := mb.NewWriter(context.Background(), e.Name(), nil)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(b)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	cb := &countingBucket{Bucket: mb, gets: map[string]int{}}
	r := &storage.Registry{}
	r.Register("mem", func(context.Context, *url.URL) (storage.Bucket, error) { return cb, nil })
	return r, cb
}

func sampleID(t testing.TB, s format.Sample) int64 {
	t.Helper()
	id, ok := s["id"].(int64)
	if !ok {
		t.Fatalf("sample without an int64 id: %v", s)
	}
	return id
}

// recordID decodes the id column of a raw record (the id column sorts
// second, after data; data is variable, id fixed: one u32 size prefix,
// then the data bytes, then 8 bytes of id).
func recordID(rec []byte) int64 {
	n := binary.LittleEndian.Uint32(rec)
	return int64(binary.LittleEndian.Uint64(rec[4+n:]))
}

func newMem() storage.Bucket { return memstore.New("data") }
