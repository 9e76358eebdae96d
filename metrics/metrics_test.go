package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/mds"
	"github.com/sluicedata/sluice/metrics"
	"github.com/sluicedata/sluice/plan"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/filestore"
	"github.com/sluicedata/sluice/stream"
)

func writeMDS(tb testing.TB, dir string, n, payload int) {
	w, err := mds.NewWriter(dir, &mds.WriterOptions{Columns: map[string]string{"id": "int", "data": "bytes"}, SizeLimit: 1 << 20})
	if err != nil {
		tb.Fatal(err)
	}
	for i := range n {
		if err := w.Write(format.Sample{"id": int64(i), "data": make([]byte, payload)}); err != nil {
			tb.Fatal(err)
		}
	}
	if err := w.Finish(); err != nil {
		tb.Fatal(err)
	}
}

func fileRegistry() *storage.Registry {
	r := &storage.Registry{}
	r.Register("file", filestore.Open)
	return r
}

// A collector over a stream's figures scrapes into text the official
// parser reads back with the same values, and the store histogram counts
// every request.
func TestCollectorAndStore(t *testing.T) {
	dir := t.TempDir()
	remote := filepath.Join(dir, "remote")
	writeMDS(t, remote, 500, 3000)
	st := metrics.NewStore()
	ctx := context.Background()
	ds, err := stream.Open(ctx, &stream.Options{Remote: "file://" + remote, Local: filepath.Join(dir, "cache"),
		Registry: st.Registry(fileRegistry()), BatchSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	ep, err := ds.NewEpoch(ctx, plan.World{Nodes: 1, RanksPerNode: 1}, 1)
	if err != nil {
		t.Fatal(err)
	}
	it, err := ep.RankIter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for it.Next() {
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	it.Close()
	reg := prometheus.NewRegistry()
	if err := st.Register(reg); err != nil {
		t.Fatal(err)
	}
	s := ds.Stats()
	reg.MustRegister(metrics.NewCollector(func() metrics.Snapshot {
		r := metrics.Rank{Dataset: remote, Rank: 3, Samples: s.Samples, Bytes: s.Bytes, Wait: s.Wait,
			FirstSample: s.FirstSample, Hits: s.Hits, Misses: s.Misses}
		half := r
		half.Samples /= 2
		rest := r
		rest.Samples -= half.Samples
		rest.Bytes, rest.Wait, rest.Hits, rest.Misses = 0, 0, 0, 0
		return metrics.Snapshot{Ranks: []metrics.Rank{half, rest}, // two workers of rank 3
			Caches: []metrics.Cache{{Dir: dir, Bytes: 123, Limit: 456, Downloads: s.Downloads}}}
	}))
	srv := httptest.NewServer(metrics.Handler(reg))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, body)
	}
	one := func(name string) float64 {
		f := fams[name]
		if f == nil || len(f.Metric) != 1 {
			t.Fatalf("%s: %v", name, f)
		}
		m := f.Metric[0]
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		}
		return float64(m.Histogram.GetSampleCount())
	}
	if v := one("sluice_samples_delivered_total"); v != 500 {
		t.Errorf("samples %v, want 500 (the two workers summed)", v)
	}
	if v := one("sluice_bytes_delivered_total"); v != float64(s.Bytes) {
		t.Errorf("bytes %v, want %d", v, s.Bytes)
	}
	if v := one("sluice_cache_limit_bytes"); v != 456 {
		t.Errorf("limit %v", v)
	}
	var gets float64
	for _, m := range fams["sluice_store_request_seconds"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "op" && l.GetValue() == "get" {
				gets += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	if v := gets; v < float64(s.Downloads) || s.Downloads == 0 {
		t.Errorf("%v timed GETs for %d downloads", v, s.Downloads)
	}
	if !strings.Contains(string(body), `rank="3"`) {
		t.Errorf("no rank label:\n%s", body)
	}
}

func TestListen(t *testing.T) {
	for _, a := range []string{"0.0.0.0:0", "[::]:0", "10.1.2.3:9400", ":9400"} {
		if _, err := metrics.Listen(a, false); !errors.Is(err, metrics.ErrNotLoopback) {
			t.Errorf("%s: %v, want ErrNotLoopback", a, err)
		}
	}
	for _, a := range []string{"127.0.0.1:0", "localhost:0"} {
		ln, err := metrics.Listen(a, false)
		if err != nil {
			t.Errorf("%s: %v", a, err)
			continue
		}
		ln.Close()
	}
	sock := filepath.Join(t.TempDir(), "m.sock")
	ln, err := metrics.Listen("unix:"+sock, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := metrics.Listen("unix:"+sock, false); err == nil {
		t.Error("a second listener on a live socket")
	}
	ln.Close()
	if _, err := metrics.Listen("nonsense", false); err == nil {
		t.Error("bad address accepted")
	}
}

// BenchmarkWarmRead reads a warm cache with and without the metrics (the
// instrumented store and a scrape every 10 ms): the difference is the
// metrics' cost on the read path.
func BenchmarkWarmRead(b *testing.B) {
	dir := b.TempDir()
	remote := filepath.Join(dir, "remote")
	writeMDS(b, remote, 20000, 1000)
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("metrics=%v", on), func(b *testing.B) {
			ctx := context.Background()
			reg := fileRegistry()
			st := metrics.NewStore()
			if on {
				reg = st.Registry(reg)
			}
			opts := &stream.Options{Remote: "file://" + remote, Local: filepath.Join(dir, "cache"), Registry: reg, BatchSize: 32}
			var n int64
			for b.Loop() {
				ds, err := stream.Open(ctx, opts)
				if err != nil {
					b.Fatal(err)
				}
				stop := make(chan struct{})
				done := make(chan struct{})
				if on {
					preg := prometheus.NewRegistry()
					_ = st.Register(preg)
					preg.MustRegister(metrics.NewCollector(func() metrics.Snapshot {
						s := ds.Stats()
						return metrics.Snapshot{Ranks: []metrics.Rank{{Dataset: remote, Samples: s.Samples, Bytes: s.Bytes,
							Wait: s.Wait, Hits: s.Hits, Misses: s.Misses, Prefetched: s.Prefetched}}}
					}))
					go func() {
						defer close(done)
						tk := time.NewTicker(10 * time.Millisecond)
						defer tk.Stop()
						for {
							select {
							case <-stop:
								return
							case <-tk.C:
								_, _ = preg.Gather()
							}
						}
					}()
				} else {
					close(done)
				}
				ep, err := ds.NewEpoch(ctx, plan.World{Nodes: 1, RanksPerNode: 1}, 1)
				if err != nil {
					b.Fatal(err)
				}
				it, err := ep.RankIter(ctx)
				if err != nil {
					b.Fatal(err)
				}
				for it.Next() {
					n++
				}
				it.Close()
				close(stop)
				<-done
				ds.Close()
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "samples/s")
		})
	}
}
