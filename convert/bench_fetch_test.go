package convert

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkFetchManifest converts a manifest of URLs served by a loopback
// HTTP server: small JPEGs (about 1 KB) embedded and checked, one row in
// 20 a 404 (reported once, not retried). 4000 rows; 1000 with -short.
func BenchmarkFetchManifest(b *testing.B) {
	n := 4000
	if testing.Short() {
		n = 1000
	}
	jpg := makeJPEG(b, 3, 32, 32)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "0.jpg") && strings.HasSuffix(r.URL.Path, "00.jpg") {
			http.NotFound(w, r)
			return
		}
		if strings.HasSuffix(r.URL.Path, "5.jpg") && strings.HasSuffix(r.URL.Path, "55.jpg") {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "image/jpeg")
		w.Write(jpg)
	}))
	defer srv.Close()
	var m bytes.Buffer
	missing := 0
	for i := range n {
		if i%100 == 0 || i%100 == 55 {
			missing++
		}
		fmt.Fprintf(&m, "{\"id\": %d, \"url\": \"%s/img/%06d.jpg\"}\n", i, srv.URL, i)
	}
	dir := b.TempDir()
	in := filepath.Join(dir, "m.jsonl")
	if err := os.WriteFile(in, m.Bytes(), 0o644); err != nil {
		b.Fatal(err)
	}
	reg := testRegistry()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		out := filepath.Join(dir, fmt.Sprint(i))
		i++
		rep, err := Run(b.Context(), &Options{
			Input: in, Output: out, Registry: reg, FetchAllowNets: loopbackNets,
			Fetch: []FetchColumn{{Column: "url", Encoding: "jpeg"}},
		})
		if err != nil {
			b.Fatal(err)
		}
		if rep.SamplesOut != int64(n-missing) || rep.Failures["not_found"] != int64(missing) {
			b.Fatalf("out %d, failures %v; want %d out and %d not_found", rep.SamplesOut, rep.Failures, n-missing, missing)
		}
		b.StopTimer()
		os.RemoveAll(out)
		b.StartTimer()
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}
