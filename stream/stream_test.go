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

	"github.com/sluicedata/sluice/cache"
	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/stream"
)

func TestGetRemote(t *testing.T) {
	for _, comp := range []string{"", "zstd"} {
		t.Run("compression="+comp, func(t *testing.T) {
			ctx := context.Background()
			reg, cb := memDataset(t, spec{samples: 300, payload: 100, sizeLimit: 4000, compression: comp, hashes: []string{"xxh64"}})
			ds, err := stream.Open(ctx, &stream.Options{Remote: "mem://data", Local: t.TempDir(), Registry: reg, ValidateHash: "xxh64"})
			if err != nil {
				t.Fatal(err)
			}
			defer ds.Close()
			if ds.Len() != 300 {
				t.Fatalf("Len = %d, want 300", ds.Len())
			}
			for i := int64(299); i >= 0; i -= 7 {
				s, err := ds.Get(ctx, i)
				if err != nil {
					t.Fatal(err)
				}
				if id := sampleID(t, s); id != i {
					t.Fatalf("Get(%d) returned sample %d", i, id)
				}
				if !bytes.Equal(s["data"].([]byte), payload(int(i), 100)) {
					t.Fatalf("Get(%d): wrong payload", i)
				}
			}
			s, err := ds.Get(ctx, -1)
			if err != nil || sampleID(t, s) != 299 {
				t.Fatalf("Get(-1) = %v, %v", s, err)
			}
			for k, n := range cb.counts() {
				if n != 1 && k != "index.json" {
					t.Errorf("%s downloaded %d times", k, n)
				}
			}
		})
	}
}

func TestOpenLimitTooSmall(t *testing.T) {
	ctx := context.Background()
	reg, _ := memDataset(t, spec{samples: 100, payload: 100, sizeLimit: 4000})
	_, err := stream.Open(ctx, &stream.Options{Remote: "mem://data", Local: t.TempDir(), Registry: reg, CacheLimit: 5000})
	var le *cache.LimitError
	if !errors.As(err, &le) {
		t.Fatalf("Open with a 5000-byte limit = %v, want a LimitError", err)
	}
	if le.Min <= 5000 || !strings.Contains(err.Error(), "at least") {
		t.Fatalf("error %q does not give a workable minimum", err)
	}
	// The minimum it names works.
	ds, err := stream.Open(ctx, &stream.Options{Remote: "mem://data", Local: t.TempDir(), Registry: reg, CacheLimit: le.Min})
	if err != nil {
		t.Fatalf("Open with the named minimum %d: %v", le.Min, err)
	}
	for i := range ds.Len() {
		if _, err := ds.Get(ctx, i); err != nil {
			t.Fatal(err)
		}
	}
	ds.Close()
}

func TestValidateHashRejectsCorruptShard(t *testing.T) {
	ctx := context.Background()
	reg, cb := memDataset(t, spec{samples: 50, payload: 100, sizeLimit: 2000, hashes: []string{"sha1", "xxh64"}})
	// Flip one byte of the first shard in the store.
	key := "shard.00000.mds"
	r, err := cb.Bucket.NewRangeReader(ctx, key, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	buf.ReadFrom(r)
	r.Close()
	b := buf.Bytes()
	b[len(b)-1] ^= 0xff
	w, _ := cb.Bucket.NewWriter(ctx, key, nil)
	w.Write(b)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	local := t.TempDir()
	ds, err := stream.Open(ctx, &stream.Options{Remote: "mem://data", Local: local, Registry: reg, ValidateHash: "sha1", DownloadRetry: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	_, err = ds.Get(ctx, 0)
	if err == nil || !strings.Contains(err.Error(), "checksum failure") || !strings.Contains(err.Error(), key) {
		t.Fatalf("Get of a corrupt shard = %v, want a checksum failure naming %s", err, key)
	}
	if _, err := os.Stat(filepath.Join(local, key)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("corrupt shard kept in the cache: %v", err)
	}
	// Another shard is fine.
	if _, err := ds.Get(ctx, 49); err != nil {
		t.Fatal(err)
	}
}

func TestRestartDropsWrongSizeFiles(t *testing.T) {
	ctx := context.Background()
	reg, cb := memDataset(t, spec{samples: 50, payload: 100, sizeLimit: 2000})
	local := t.TempDir()
	open := func() *stream.Dataset {
		ds, err := stream.Open(ctx, &stream.Options{Remote: "mem://data", Local: local, Registry: reg})
		if err != nil {
			t.Fatal(err)
		}
		return ds
	}
	ds := open()
	if _, err := ds.Get(ctx, 0); err != nil {
		t.Fatal(err)
	}
	ds.Close()
	// Truncate the cached shard, as a disk problem might; leave a stale
	// temporary file as a killed process would.
	p := filepath.Join(local, "shard.00000.mds")
	if err := os.Truncate(p, 10); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(local, "shard.00001.mds.part"), []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	ds = open()
	defer ds.Close()
	s, err := ds.Get(ctx, 0)
	if err != nil || sampleID(t, s) != 0 {
		t.Fatalf("Get(0) after restart = %v, %v", s, err)
	}
	// The cache's pass over the files it finds runs before its first
	// download (here, of the truncated shard).
	if _, err := os.Stat(filepath.Join(local, "shard.00001.mds.part")); !errors.Is(err, fs.ErrNotExist) {
		t.Error("stale temporary file survived a restart's first download")
	}
	if n := cb.counts()["shard.00000.mds"]; n != 2 {
		t.Errorf("the truncated shard was downloaded %d times in all, want 2 (again after the restart)", n)
	}
	u, _ := ds.Cache().Usage(ctx)
	if d := dirBytes(local); u != d {
		t.Errorf("usage %d, files %d", u, d)
	}
}

// TestLocalZipSizeMismatch: a local-only shard present only compressed,
// whose compressed file is far larger than the index says (sparse here),
// is reported corrupt before it is read into memory.
func TestLocalZipSizeMismatch(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	writeDataset(t, dir, spec{samples: 10, payload: 10, compression: "zstd"})
	if err := os.Remove(filepath.Join(dir, "shard.00000.mds")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(dir, "shard.00000.mds.zstd"), 1<<40); err != nil {
		t.Skipf("cannot make a sparse file: %v", err)
	}
	ds, err := stream.Open(ctx, &stream.Options{Local: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	_, err = ds.Get(ctx, 0)
	var ce *format.CorruptError
	if !errors.As(err, &ce) || ce.File != "shard.00000.mds.zstd" || !strings.Contains(err.Error(), "1099511627776 bytes, index says") {
		t.Fatalf("oversized compressed shard: %v, want a format.CorruptError", err)
	}
}
