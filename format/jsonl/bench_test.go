package jsonl_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/jsonl"
	"github.com/sluicedata/sluice/internal/cputime"
)

// benchSamples returns n samples of about 200 bytes each (text, int,
// float), built deterministically.
func benchSamples(n int) []format.Sample {
	r := rand.New(rand.NewPCG(7, 7))
	words := strings.Fields("the quick brown fox jumps over a lazy dog while streaming shards of text data")
	out := make([]format.Sample, n)
	for i := range out {
		var b strings.Builder
		for b.Len() < 160 {
			b.WriteString(words[r.IntN(len(words))])
			b.WriteByte(' ')
		}
		out[i] = format.Sample{"id": int64(i), "score": r.Float64(), "text": b.String()}
	}
	return out
}

var benchCols = map[string]string{"id": "int", "score": "float", "text": "str"}

// benchDir returns an output directory on /dev/shm when it exists, so the
// figures measure the writer rather than the disk's fsync.
func benchDir(b *testing.B) string {
	root := os.Getenv("SLUICE_BENCH_DIR")
	if root == "" {
		if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
			root = "/dev/shm"
		}
	}
	if root == "" {
		return b.TempDir()
	}
	dir, err := os.MkdirTemp(root, "jsonl-bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func BenchmarkWrite(b *testing.B) {
	const n = 100_000
	samples := benchSamples(n)
	for _, codec := range []string{"", "zstd"} {
		b.Run(fmt.Sprintf("200B/codec=%s", codec), func(b *testing.B) {
			b.ReportAllocs()
			var bytes int64
			cpu0 := cputime.Process()
			for b.Loop() {
				dir := benchDir(b)
				w, err := jsonl.NewWriter(dir, &jsonl.WriterOptions{Columns: benchCols, Compression: codec, SizeLimit: 1 << 22})
				if err != nil {
					b.Fatal(err)
				}
				for _, s := range samples {
					if err := w.Write(s); err != nil {
						b.Fatal(err)
					}
				}
				if err := w.Finish(); err != nil {
					b.Fatal(err)
				}
				bytes = 0
				for _, s := range w.Shards() {
					bytes += s.RawData.Bytes
				}
				os.RemoveAll(dir)
			}
			b.SetBytes(bytes)
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "samples/s")
			b.ReportMetric(float64(cputime.Process()-cpu0)/float64(n*b.N), "cpu-ns/sample")
		})
	}
}

func BenchmarkRead(b *testing.B) {
	const n = 100_000
	dir := benchDir(b)
	w, err := jsonl.NewWriter(dir, &jsonl.WriterOptions{Columns: benchCols})
	if err != nil {
		b.Fatal(err)
	}
	for _, s := range benchSamples(n) {
		if err := w.Write(s); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Finish(); err != nil {
		b.Fatal(err)
	}
	info := w.Shards()[0]
	sh, err := jsonl.OpenDir(dir, &info)
	if err != nil {
		b.Fatal(err)
	}
	defer sh.Close()
	b.Run("200B/decode", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(info.RawData.Bytes / n)
		out := format.Sample{}
		j := 0
		for b.Loop() {
			if err := sh.DecodeInto(j, out); err != nil {
				b.Fatal(err)
			}
			if j++; j == n {
				j = 0
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "samples/s")
	})
	b.Run("200B/record", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(info.RawData.Bytes / n)
		j := 0
		for b.Loop() {
			if _, err := sh.Record(j); err != nil {
				b.Fatal(err)
			}
			if j++; j == n {
				j = 0
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "samples/s")
	})
}
