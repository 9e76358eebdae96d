package metrics_test

import (
	"context"
	"io"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicedata/sluice/agent"
	"github.com/sluicedata/sluice/agentapi"
	"github.com/sluicedata/sluice/internal/cputime"
	"github.com/sluicedata/sluice/metrics"
)

// BenchmarkAgentWarmRead measures the metrics' cost on the agent's
// warm-read path (the target: at most 1% of its throughput): one
// epoch of 50000 samples of 100 bytes per iteration from a warm cache,
// over the socket, in batches of 512, with metrics off (as by default)
// and on (the stores instrumented, the collector registered), scraped
// every second (15 times Prometheus's default rate) or every 10 ms (1500
// times: the scrapes' own cost becomes visible, see BenchmarkAgentScrape).
// Compare samples/s and cpu-ns/sample with -count and benchstat.
func BenchmarkAgentWarmRead(b *testing.B) {
	b.Run("metrics=off", func(b *testing.B) { benchWarmRead(b, 0) })
	b.Run("metrics=on,scrape=1s", func(b *testing.B) { benchWarmRead(b, time.Second) })
	b.Run("metrics=on,scrape=10ms", func(b *testing.B) { benchWarmRead(b, 10*time.Millisecond) })
}

// benchWarmRead reads epochs through an agent; with scrape > 0 metrics
// are on and scraped at that interval.
func benchWarmRead(b *testing.B, scrape time.Duration) {
	on := scrape > 0
	dir := b.TempDir()
	remote := filepath.Join(dir, "remote")
	writeMDS(b, remote, 50000, 100)
	reg := fileRegistry()
	var st *metrics.Store
	if on {
		st = metrics.NewStore()
		reg = st.Registry(reg)
	}
	a, err := agent.New(&agent.Options{Registry: reg, IdleTimeout: -1})
	if err != nil {
		b.Fatal(err)
	}
	lock, err := agent.AcquireLock(filepath.Join(dir, "agent"))
	if err != nil {
		b.Fatal(err)
	}
	defer lock.Release()
	ln, err := lock.Listen()
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		a.Serve(ctx, ln)
	}()
	defer func() {
		cancel()
		wg.Wait()
	}()
	if on {
		pr := prometheus.NewRegistry()
		if err := st.Register(pr); err != nil {
			b.Fatal(err)
		}
		if err := pr.Register(metrics.NewCollector(a.MetricsSnapshot)); err != nil {
			b.Fatal(err)
		}
		h := metrics.Handler(pr)
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(scrape)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					rec := httptest.NewRecorder()
					h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
					_, _ = io.Copy(io.Discard, rec.Body)
				}
			}
		}()
	}
	c, err := agentapi.Dial(ctx, agent.SocketPath(filepath.Join(dir, "agent")), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	w := agentapi.World{WorldSize: 1, LocalWorldSize: 1, NumWorkers: 1}
	op, err := c.Open(ctx, agentapi.Open{Dataset: agentapi.Dataset{Remote: "file://" + remote, Local: filepath.Join(dir, "cache"), BatchSize: 512},
		Job: "bench", World: w})
	if err != nil {
		b.Fatal(err)
	}
	epoch := func() int {
		it, err := c.Begin(ctx, agentapi.Begin{Handle: op.Handle, World: w})
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		var rel []int64
		for {
			r, err := c.Next(ctx, agentapi.Next{Iter: it.Iter, Max: 512, Release: rel})
			if err != nil {
				b.Fatal(err)
			}
			if r.Done {
				break
			}
			rel = []int64{r.ID}
			n += len(r.Entries)
		}
		c.End(ctx, it.Iter)
		return n
	}
	epoch() // cold: fills the cache
	n := 0
	cpu0 := cputime.Process()
	for b.Loop() {
		n += epoch()
	}
	// CPU time (the process's: agent, client and scraper together) varies
	// less than wall time with the machine's other load.
	b.ReportMetric(float64(cputime.Process()-cpu0)/float64(n), "cpu-ns/sample")
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "samples/s")
}

// BenchmarkAgentScrape measures one scrape of a live agent (snapshot of
// every cursor, the cache's usage read under its lock, encoding), the
// whole of what metrics add to a warm read: divided by the scrape
// interval it is the fraction of a core they take. 8 DataLoader workers
// of one rank have each read a 20000-sample epoch.
func BenchmarkAgentScrape(b *testing.B) {
	dir := b.TempDir()
	remote := filepath.Join(dir, "remote")
	writeMDS(b, remote, 20000, 100)
	st := metrics.NewStore()
	a, err := agent.New(&agent.Options{Registry: st.Registry(fileRegistry()), IdleTimeout: -1})
	if err != nil {
		b.Fatal(err)
	}
	lock, err := agent.AcquireLock(filepath.Join(dir, "agent"))
	if err != nil {
		b.Fatal(err)
	}
	defer lock.Release()
	ln, err := lock.Listen()
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.Serve(ctx, ln)
	}()
	defer func() {
		cancel()
		<-done
	}()
	c, err := agentapi.Dial(ctx, agent.SocketPath(filepath.Join(dir, "agent")), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	const workers = 8
	ds := agentapi.Dataset{Remote: "file://" + remote, Local: filepath.Join(dir, "cache"), BatchSize: 64}
	for wk := range workers {
		w := agentapi.World{WorldSize: 1, LocalWorldSize: 1, Worker: wk, NumWorkers: workers}
		op, err := c.Open(ctx, agentapi.Open{Dataset: ds, Job: "scrape", World: w})
		if err != nil {
			b.Fatal(err)
		}
		it, err := c.Begin(ctx, agentapi.Begin{Handle: op.Handle, World: w})
		if err != nil {
			b.Fatal(err)
		}
		var rel []int64
		for {
			r, err := c.Next(ctx, agentapi.Next{Iter: it.Iter, Max: 512, Release: rel})
			if err != nil {
				b.Fatal(err)
			}
			if r.Done {
				break
			}
			rel = []int64{r.ID}
		}
		c.End(ctx, it.Iter)
	}
	pr := prometheus.NewRegistry()
	if err := st.Register(pr); err != nil {
		b.Fatal(err)
	}
	if err := pr.Register(metrics.NewCollector(a.MetricsSnapshot)); err != nil {
		b.Fatal(err)
	}
	h := metrics.Handler(pr)
	b.ReportAllocs()
	var size int
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		if rec.Code != 200 {
			b.Fatalf("scrape: status %d", rec.Code)
		}
		size = rec.Body.Len()
	}
	b.ReportMetric(float64(size), "bytes/scrape")
}
