package storagetest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"golang.org/x/sync/errgroup"

	"github.com/sluicedata/sluice/storage"
)

// BenchOptions sizes RunBenchmarksWith. Zero fields take the defaults.
type BenchOptions struct {
	// Objects is the number of objects the download benchmark fetches per
	// iteration. Zero means 16.
	Objects int
	// ObjectSize is their size in bytes. Zero means 4 MiB.
	ObjectSize int
	// Parallel is the number of objects downloaded at once. Zero means 8.
	Parallel int
	// Prefix is prepended to the benchmark's keys. Zero means "bench/".
	Prefix string
	// Writer, when not nil, stores the objects for a read-only bucket; the
	// Write1MiB benchmark is then skipped.
	Writer storage.Bucket
}

// RunBenchmarks runs the standard benchmarks on a writable bucket (see
// RunBenchmarksWith).
func RunBenchmarks(b *testing.B, bkt storage.Bucket) {
	RunBenchmarksWith(b, bkt, nil)
}

// RunBenchmarksWith measures a writable bucket: "Download" fetches Objects
// objects of ObjectSize with storage.Download, Parallel at a time, to local
// files (bytes per second is the throughput); "DownloadParts" fetches one
// object as parallel ranged parts; "RangeRead4KiB" reads small random
// ranges; "Stat" and "Write1MiB" time those calls. The objects are written
// once, before the timers start.
func RunBenchmarksWith(b *testing.B, bkt storage.Bucket, opts *BenchOptions) {
	var o BenchOptions
	if opts != nil {
		o = *opts
	}
	if o.Objects == 0 {
		o.Objects = 16
	}
	if o.ObjectSize == 0 {
		o.ObjectSize = 4 << 20
	}
	if o.Parallel == 0 {
		o.Parallel = 8
	}
	if o.Prefix == "" {
		o.Prefix = "bench/"
	}
	ctx := context.Background()
	w := bkt
	if o.Writer != nil {
		w = o.Writer
	}
	keys := make([]string, o.Objects)
	for i := range keys {
		keys[i] = fmt.Sprintf("%sshard.%05d.mds", o.Prefix, i)
		Put(b, w, keys[i], Pattern(uint64(i), o.ObjectSize))
	}

	b.Run("Download", func(b *testing.B) {
		dir := b.TempDir()
		b.SetBytes(int64(o.Objects) * int64(o.ObjectSize))
		b.ReportAllocs()
		for b.Loop() {
			g, gctx := errgroup.WithContext(ctx)
			g.SetLimit(o.Parallel)
			for i, k := range keys {
				g.Go(func() error {
					_, err := storage.Download(gctx, bkt, k, filepath.Join(dir, fmt.Sprint(i)),
						&storage.DownloadOptions{Size: int64(o.ObjectSize), NoSync: true})
					return err
				})
			}
			if err := g.Wait(); err != nil {
				b.Fatal(err)
			}
		}
	})

	b.Run("DownloadParts", func(b *testing.B) {
		dir := b.TempDir()
		b.SetBytes(int64(o.ObjectSize))
		b.ReportAllocs()
		opts := &storage.DownloadOptions{PartSize: int64(max(o.ObjectSize/o.Parallel, 1)), Concurrency: o.Parallel, NoSync: true}
		for b.Loop() {
			if _, err := storage.Download(ctx, bkt, keys[0], filepath.Join(dir, "one"), opts); err != nil {
				b.Fatal(err)
			}
		}
	})

	b.Run("RangeRead4KiB", func(b *testing.B) {
		r := rand.New(rand.NewPCG(1, 2))
		buf := make([]byte, 4096)
		b.SetBytes(4096)
		b.ReportAllocs()
		for b.Loop() {
			off := r.Int64N(int64(o.ObjectSize - 4096))
			rc, err := bkt.NewRangeReader(ctx, keys[r.IntN(len(keys))], off, 4096)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadFull(rc, buf); err != nil {
				b.Fatal(err)
			}
			rc.Close()
		}
	})

	b.Run("Stat", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := bkt.Stat(ctx, keys[i%len(keys)]); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})

	if o.Writer != nil {
		return
	}
	b.Run("Write1MiB", func(b *testing.B) {
		data := Pattern(99, 1<<20)
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := storage.WriteFrom(ctx, bkt, o.Prefix+"write", bytes.NewReader(data), nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}
