package mds

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/internal/cputime"
)

// benchSample returns a sample of about size bytes: an int id and a
// random (poorly compressible) half plus a repetitive half of bytes.
func benchSample(r *rand.Rand, size int) format.Sample {
	b := make([]byte, size-12)
	for i := 0; i < len(b)/2; i++ {
		b[i] = byte(r.Uint32())
	}
	for i := len(b) / 2; i < len(b); i++ {
		b[i] = byte(i % 7)
	}
	return format.Sample{"id": int64(r.Uint64()), "data": b}
}

var benchCols = map[string]string{"id": "int", "data": "bytes"}

// benchDir returns a fresh output directory for write benchmarks: under
// $SLUICE_BENCH_DIR if set, else under /dev/shm when it exists (so the
// figures measure the writer, not the disk's fsync speed), else a test
// temporary directory.
func benchDir(b *testing.B) string {
	b.Helper()
	root := os.Getenv("SLUICE_BENCH_DIR")
	if root == "" {
		if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
			root = "/dev/shm"
		}
	}
	if root == "" {
		return b.TempDir()
	}
	dir, err := os.MkdirTemp(root, "sluice-bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

var benchCases = []struct {
	name  string
	size  int
	codec string
}{
	{"200B/none", 200, ""},
	{"200B/zstd", 200, "zstd"},
	{"100KB/none", 100 << 10, ""},
	{"100KB/zstd", 100 << 10, "zstd"},
}

// BenchmarkWrite measures the Writer end to end (encode, size accounting,
// hash, compress on every core, atomic file writes, index) with MosaicML's
// default 64 MiB shards and an xxh64 hash.
func BenchmarkWrite(b *testing.B) {
	for _, c := range benchCases {
		b.Run(c.name, func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 2))
			samples := make([]format.Sample, 64)
			for i := range samples {
				samples[i] = benchSample(r, c.size)
			}
			w, err := NewWriter(benchDir(b), &WriterOptions{Columns: benchCols, Compression: c.codec, Hashes: []string{"xxh64"}, SizeLimit: DefaultSizeLimit})
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(c.size))
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cputime.Process()
			for i := 0; i < b.N; i++ {
				if err := w.Write(samples[i%len(samples)]); err != nil {
					b.Fatal(err)
				}
			}
			if err := w.Finish(); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "samples/s")
			b.ReportMetric(float64(cputime.Process()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// benchDataset writes n samples of size bytes and opens a Reader on it.
func benchDataset(b *testing.B, n, size int, codec string) *Reader {
	b.Helper()
	dir := b.TempDir()
	w, err := NewWriter(dir, &WriterOptions{Columns: benchCols, Compression: codec, SizeLimit: DefaultSizeLimit})
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 4))
	s := benchSample(r, size)
	for i := 0; i < n; i++ {
		if err := w.Write(s); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Finish(); err != nil {
		b.Fatal(err)
	}
	rd, err := Open(dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	// Open (and for zstd, decompress) every shard before timing.
	for k := range rd.Index().Shards {
		if _, err := rd.Shard(k); err != nil {
			b.Fatal(err)
		}
	}
	return rd
}

// BenchmarkRead measures random-order-free sequential reads on one core
// from opened shards (mapped raw files; zstd shards decompressed at open):
// "view" takes each sample's columns as views of the mapping (no copy),
// "copy" copies the data column out, "decode" builds a format.Sample.
func BenchmarkRead(b *testing.B) {
	for _, c := range benchCases {
		n := 200000
		if c.size > 1000 {
			n = 4000
		}
		var rd *Reader
		for _, mode := range []string{"view", "copy", "decode"} {
			b.Run(fmt.Sprintf("%s/%s", c.name, mode), func(b *testing.B) {
				if rd == nil {
					rd = benchDataset(b, n, c.size, c.codec)
				}
				total := rd.Len()
				var cols [][]byte
				var buf []byte
				b.SetBytes(int64(c.size))
				b.ReportAllocs()
				b.ResetTimer()
				cpu0 := cputime.Process()
				k, j := 0, 0
				s, _ := rd.Shard(0)
				for i := 0; i < b.N; i++ {
					if j == s.Len() {
						k, j = (k+1)%len(rd.Index().Shards), 0
						s, _ = rd.Shard(k)
						if int64(i)%total == 0 {
							k, j = 0, 0
							s, _ = rd.Shard(0)
						}
					}
					switch mode {
					case "decode":
						if _, err := s.Sample(j); err != nil {
							b.Fatal(err)
						}
					default:
						rec, err := s.Record(j)
						if err != nil {
							b.Fatal(err)
						}
						if cols, err = s.Columns(j, rec, cols[:0]); err != nil {
							b.Fatal(err)
						}
						if mode == "copy" {
							buf = append(buf[:0], cols[0]...) // "data" sorts first
						}
					}
					j++
				}
				b.StopTimer()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "samples/s")
				b.ReportMetric(float64(cputime.Process()-cpu0)/float64(b.N), "cpu-ns/op")
			})
		}
		if rd != nil {
			rd.Close()
		}
	}
}
