package httpstore_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/filestore"
	"github.com/sluicedata/sluice/storage/httpstore"
	"github.com/sluicedata/sluice/storage/limit"
	"github.com/sluicedata/sluice/storage/retry"
	"github.com/sluicedata/sluice/storage/storagetest"
)

// BenchmarkParallelDownload compares downloading a dataset's shards with N
// parallel requests through the full stack (httpstore + limit + retry +
// storage.Download: temp file, size check, fsync skipped, rename) against
// plain concurrent GETs with net/http writing the same files. The ratio of
// the two MB/s figures is the overhead of Sluice's download path.
func BenchmarkParallelDownload(b *testing.B) {
	const (
		shards    = 32
		shardSize = 4 << 20
		parallel  = 8
	)
	dir := b.TempDir()
	w, err := filestore.New(dir)
	if err != nil {
		b.Fatal(err)
	}
	keys := make([]string, shards)
	for i := range keys {
		keys[i] = fmt.Sprintf("shard.%05d.mds", i)
		storagetest.Put(b, w, keys[i], storagetest.Pattern(uint64(i), shardSize))
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer srv.Close()
	ctx := context.Background()

	b.Run("RawGET", func(b *testing.B) {
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
		out := b.TempDir()
		b.SetBytes(shards * shardSize)
		b.ReportAllocs()
		for b.Loop() {
			g, gctx := errgroup.WithContext(ctx)
			g.SetLimit(parallel)
			for i, k := range keys {
				g.Go(func() error {
					req, _ := http.NewRequestWithContext(gctx, http.MethodGet, srv.URL+"/"+k, nil)
					resp, err := client.Do(req)
					if err != nil {
						return err
					}
					defer resp.Body.Close()
					f, err := os.Create(filepath.Join(out, fmt.Sprint(i)))
					if err != nil {
						return err
					}
					_, err = io.Copy(f, resp.Body)
					if cerr := f.Close(); err == nil {
						err = cerr
					}
					return err
				})
			}
			if err := g.Wait(); err != nil {
				b.Fatal(err)
			}
		}
	})

	// CopyTree from the HTTP server into a local directory, as `sluice cp`
	// does: bytes stream from store to store through one buffer per object.
	b.Run("CopyTree", func(b *testing.B) {
		hb, err := httpstore.New(srv.URL, nil)
		if err != nil {
			b.Fatal(err)
		}
		lb, _ := limit.New(hb, 64)
		rb, _ := retry.New(lb, nil)
		defer rb.Close()
		objects := make([]storage.ObjectInfo, len(keys))
		for i, k := range keys {
			objects[i] = storage.ObjectInfo{Key: k, Size: shardSize}
		}
		b.SetBytes(shards * shardSize)
		b.ReportAllocs()
		for b.Loop() {
			dst, err := filestore.New(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			if _, err := storage.CopyTree(ctx, rb, dst, &storage.CopyTreeOptions{Objects: objects, Concurrency: parallel}); err != nil {
				b.Fatal(err)
			}
			dst.Close()
		}
	})

	b.Run("Sluice", func(b *testing.B) {
		hb, err := httpstore.New(srv.URL, nil)
		if err != nil {
			b.Fatal(err)
		}
		lb, _ := limit.New(hb, 64)
		rb, _ := retry.New(lb, nil)
		defer rb.Close()
		out := b.TempDir()
		b.SetBytes(shards * shardSize)
		b.ReportAllocs()
		for b.Loop() {
			g, gctx := errgroup.WithContext(ctx)
			g.SetLimit(parallel)
			for i, k := range keys {
				g.Go(func() error {
					_, err := storage.Download(gctx, rb, k, filepath.Join(out, fmt.Sprint(i)),
						&storage.DownloadOptions{Size: shardSize, NoSync: true})
					return err
				})
			}
			if err := g.Wait(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkCheckedGET is the cost of checking a whole-object body against
// the checksum the server sends (storage.CheckedReader on httpstore's hot
// path): the same 4 MiB object read through the stack (retry, limit,
// httpstore) from a server that sends GCS's x-goog-hash CRC32C, or none.
// CPU per op (-benchtime, with `time`) is the figure to compare under load.
func BenchmarkCheckedGET(b *testing.B) {
	const size = 4 << 20
	data := storagetest.Pattern(5, size)
	crc := crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli))
	hash := "crc32c=" + base64.StdEncoding.EncodeToString(binary.BigEndian.AppendUint32(nil, crc))
	for _, checked := range []bool{false, true} {
		name := "unchecked"
		if checked {
			name = "crc32c"
		}
		b.Run(name, func(b *testing.B) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if checked {
					w.Header().Set("X-Goog-Hash", hash)
				}
				http.ServeContent(w, r, "obj", time.Time{}, bytes.NewReader(data))
			}))
			defer srv.Close()
			hb, err := httpstore.New(srv.URL, nil)
			if err != nil {
				b.Fatal(err)
			}
			lb, _ := limit.New(hb, 64)
			rb, _ := retry.New(lb, nil)
			defer rb.Close()
			buf := make([]byte, 256<<10)
			b.SetBytes(size)
			b.ReportAllocs()
			for b.Loop() {
				r, err := rb.NewRangeReader(context.Background(), "obj", 0, -1)
				if err != nil {
					b.Fatal(err)
				}
				n, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{r}, buf)
				r.Close()
				if err != nil || n != size {
					b.Fatalf("read %d bytes: %v", n, err)
				}
			}
		})
	}
}
