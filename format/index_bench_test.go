package format_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/internal/cputime"
)

// bigIndex writes an index.json shaped like a large MosaicML dataset:
// n zstd-compressed MDS shards of three columns, each with a raw and a
// zip file (~380 bytes per entry, 40k shards ≈ 15 MB, like the 39k-shard
// 14.5 MB index of the issue).
func bigIndex(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"shards": [`)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, `{"column_encodings": ["str", "int", "bytes"], "column_names": ["text", "id", "tokens"], "column_sizes": [null, 8, null], "compression": "zstd", "format": "mds", "hashes": [], "raw_data": {"basename": "shard.%05d.mds", "bytes": %d, "hashes": {}}, "samples": %d, "size_limit": 67108864, "version": 2, "zip_data": {"basename": "shard.%05d.mds.zstd", "bytes": %d, "hashes": {}}}`,
			i, 67000000+i%1000, 4000+i%97, i, 21000000+i%777)
	}
	b.WriteString(`], "version": 2}`)
	return b.Bytes()
}

// BenchmarkParseIndex40k parses a 40k-shard index; heap-MB is the live
// heap the parsed index holds (input excluded), a guard checks the
// sample count.
func BenchmarkParseIndex40k(b *testing.B) {
	text := bigIndex(40_000)
	var want int64
	for i := range 40_000 {
		want += int64(4000 + i%97)
	}
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	var idx *format.Index
	cpu := cputime.Process()
	for b.Loop() {
		var err error
		idx, err = format.ParseIndex(text)
		if err != nil {
			b.Fatal(err)
		}
		if idx.Samples() != want {
			b.Fatalf("samples %d, want %d", idx.Samples(), want)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(cputime.Process()-cpu)/float64(b.N)/1e6, "cpu-ms/op")
	idx = nil
	runtime.GC()
	var m0 runtime.MemStats
	runtime.ReadMemStats(&m0)
	idx, _ = format.ParseIndex(text)
	runtime.GC()
	var m1 runtime.MemStats
	runtime.ReadMemStats(&m1)
	b.ReportMetric(float64(m1.HeapAlloc-m0.HeapAlloc)/1e6, "heap-MB")
	b.ReportMetric(float64(len(text))/1e6, "index-MB")
	runtime.KeepAlive(idx)
}

func readIndexFile(path string) (*format.CompactIndex, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	return format.ReadCompactIndexSize(f, fi.Size())
}

// BenchmarkCompactIndex40k parses a 40k-shard index into the compact
// layout, from memory, streamed from a reader, and streamed from a file
// (open, stat, read and parse, the columns sized from its length: how
// the stream reads a cached index). The guard checks the sample count
// and the last shard's basename.
func BenchmarkCompactIndex40k(b *testing.B) {
	text := bigIndex(40_000)
	var want int64
	for i := range 40_000 {
		want += int64(4000 + i%97)
	}
	path := filepath.Join(b.TempDir(), format.IndexFile)
	if err := os.WriteFile(path, text, 0o644); err != nil {
		b.Fatal(err)
	}
	for _, mode := range []string{"bytes", "reader", "file"} {
		b.Run(mode, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			var c *format.CompactIndex
			var err error
			cpu := cputime.Process()
			for b.Loop() {
				switch mode {
				case "bytes":
					c, err = format.ParseCompactIndex(text)
				case "reader":
					c, err = format.ReadCompactIndex(bytes.NewReader(text))
				case "file":
					c, err = readIndexFile(path)
				}
				if err != nil {
					b.Fatal(err)
				}
				if c.Samples() != want || c.Len() != 40_000 || c.Basename(39_999) != "shard.39999.mds" {
					b.Fatalf("samples %d, want %d", c.Samples(), want)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(cputime.Process()-cpu)/float64(b.N)/1e6, "cpu-ms/op")
			c = nil
			runtime.GC()
			var m0 runtime.MemStats
			runtime.ReadMemStats(&m0)
			c, _ = format.ParseCompactIndex(text)
			runtime.GC()
			var m1 runtime.MemStats
			runtime.ReadMemStats(&m1)
			b.ReportMetric(float64(m1.HeapAlloc-m0.HeapAlloc)/1e6, "heap-MB")
			runtime.KeepAlive(c)
		})
	}
}

// BenchmarkSharedIndex40k materialises a parsed 40k-shard index as
// []ShardInfo with Index (every shard's own slices and maps) and with
// SharedIndex (the configuration's shared).
func BenchmarkSharedIndex40k(b *testing.B) {
	c, err := format.ParseCompactIndex(bigIndex(40_000))
	if err != nil {
		b.Fatal(err)
	}
	for _, mode := range []string{"Index", "SharedIndex"} {
		b.Run(mode, func(b *testing.B) {
			b.ReportAllocs()
			cpu := cputime.Process()
			for b.Loop() {
				var idx *format.Index
				if mode == "Index" {
					idx = c.Index()
				} else {
					idx = c.SharedIndex()
				}
				if len(idx.Shards) != 40_000 || idx.Shards[39_999].RawData.Basename != "shard.39999.mds" {
					b.Fatal("wrong shards")
				}
			}
			b.ReportMetric(float64(cputime.Process()-cpu)/float64(b.N)/1e6, "cpu-ms/op")
		})
	}
}
