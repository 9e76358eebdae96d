package cli

import (
	"context"
	"io"
	"path/filepath"
	"testing"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/mds"
)

// BenchmarkDump dumps a dataset of 20,000 samples of about 200 bytes in
// 16 zstd shards, from a local directory and from a store (memory),
// where each shard is downloaded to a temporary directory first.
func BenchmarkDump(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "ds")
	const n = 20000
	w, err := mds.NewWriter(dir, &mds.WriterOptions{Columns: map[string]string{"id": "int", "txt": "str", "blob": "bytes"},
		Compression: "zstd", Hashes: []string{"xxh64"}, SizeLimit: n * 220 / 16})
	if err != nil {
		b.Fatal(err)
	}
	blob := make([]byte, 150)
	for i := 0; i < n; i++ {
		blob[i%150] = byte(i)
		if err := w.Write(format.Sample{"id": int64(i), "txt": "sample text of some length", "blob": blob}); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Finish(); err != nil {
		b.Fatal(err)
	}
	run := func(b *testing.B, e *env, arg string) {
		for b.Loop() {
			if err := runDump(context.Background(), e, arg, 0, -1, false, io.Discard); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "samples/s")
	}
	b.Run("local", func(b *testing.B) {
		run(b, &env{stdout: io.Discard, stderr: io.Discard, registry: memRegistry(nil)}, dir)
	})
	b.Run("store", func(b *testing.B) {
		mem := toMem(b, dir)
		run(b, &env{stdout: io.Discard, stderr: io.Discard, registry: memRegistry(mem)}, "mem://ds")
	})
}
