package convert

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkConvertParquet converts a Parquet file (written by the Go
// library, 100 rows per row group) with scalar, nullable, list-of-float,
// struct and list-of-string columns (100k rows; 20k with -short).
func BenchmarkConvertParquet(b *testing.B) {
	n := 100_000
	if testing.Short() {
		n = 20_000
	}
	in := filepath.Join(b.TempDir(), "in.parquet")
	pqGroupRows = 10000
	defer func() { pqGroupRows = 100 }()
	writeParquet(b, in, pqRecords(n))
	st, err := os.Stat(in)
	if err != nil {
		b.Fatal(err)
	}
	reg := testRegistry()
	dir := b.TempDir()
	b.SetBytes(st.Size())
	b.ReportAllocs()
	i := 0
	var raw int64
	for b.Loop() {
		out := filepath.Join(dir, "o")
		i++
		rep, err := Run(b.Context(), &Options{Input: in, Output: out, Registry: reg, Nulls: NullsDefault})
		if err != nil {
			b.Fatal(err)
		}
		if rep.SamplesOut != int64(n) {
			b.Fatalf("wrote %d samples", rep.SamplesOut)
		}
		raw = rep.RawBytes
		b.StopTimer()
		os.RemoveAll(out)
		b.StartTimer()
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(raw)*float64(b.N)/1e6/b.Elapsed().Seconds(), "MDS-MB/s")
}
