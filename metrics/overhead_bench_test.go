package metrics_test

import (
	"context"
	"io"
	"math/rand/v2"
	"net/http/httptest"
	"path/filepath"
	"slices"
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
	epoch := warmReadRig(b, scrape)
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

// BenchmarkAgentWarmReadPaired resolves what BenchmarkAgentWarmRead
// cannot on a shared machine, where its repeats vary by tens of percent:
// two agents in one process, one with metrics off and one with metrics on
// and scraped every 100 ms (150 times Prometheus's default rate), read
// epochs in ABBA order, so that each pair of adjacent epochs sees the same
// machine load. Each iteration is one pair; per pair the ratio of the
// on-agent's CPU time to the off-agent's is recorded. It reports the
// median ratio and the 2.5% and 97.5% quantiles of the median over
// bootstrap resamples (ratio-ci-lo/hi): an overhead at most 1% shows as a
// median at most 1.01 with the interval around it. Run with -benchtime
// 200x or more for a narrow interval.
func BenchmarkAgentWarmReadPaired(b *testing.B) {
	off := warmReadRig(b, 0)
	on := warmReadRig(b, 100*time.Millisecond)
	off()
	on() // both caches warm
	cpuOf := func(epoch func() int) float64 {
		c0 := cputime.Process()
		if n := epoch(); n != 50000 {
			b.Fatalf("epoch read %d samples, want 50000", n)
		}
		return float64(cputime.Process() - c0)
	}
	var ratios []float64
	var offCPU, onCPU float64
	i := 0
	for b.Loop() {
		var a, c float64
		if i%2 == 0 {
			a = cpuOf(off)
			c = cpuOf(on)
		} else {
			c = cpuOf(on)
			a = cpuOf(off)
		}
		i++
		if a > 0 {
			ratios = append(ratios, c/a)
		}
		offCPU += a
		onCPU += c
	}
	if len(ratios) == 0 {
		return
	}
	med, lo, hi := bootstrapMedian(ratios, 2000)
	b.ReportMetric(med, "ratio-median")
	b.ReportMetric(lo, "ratio-ci-lo")
	b.ReportMetric(hi, "ratio-ci-hi")
	b.ReportMetric(onCPU/offCPU, "ratio-total")
	b.ReportMetric(offCPU/float64(50000*len(ratios)), "off-cpu-ns/sample")
	b.ReportMetric(onCPU/float64(50000*len(ratios)), "on-cpu-ns/sample")
}

// bootstrapMedian returns the median of xs and the 2.5% and 97.5%
// quantiles of the medians of n resamples of xs with replacement (a
// fixed-seed generator: the same input gives the same interval).
func bootstrapMedian(xs []float64, n int) (med, lo, hi float64) {
	median := func(v []float64) float64 {
		s := slices.Clone(v)
		slices.Sort(s)
		if len(s)%2 == 1 {
			return s[len(s)/2]
		}
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	rng := rand.New(rand.NewPCG(1, 2))
	meds := make([]float64, n)
	re := make([]float64, len(xs))
	for k := range meds {
		for j := range re {
			re[j] = xs[rng.IntN(len(xs))]
		}
		meds[k] = median(re)
	}
	slices.Sort(meds)
	return median(xs), meds[n*25/1000], meds[n*975/1000]
}

// warmReadRig serves an agent over a fresh dataset of 50000 samples of
// 100 bytes (with scrape > 0: metrics on, scraped at that interval) and
// returns a function reading one epoch through it in batches of 512,
// returning the number of samples read. Everything stops when b ends.
func warmReadRig(b *testing.B, scrape time.Duration) func() int {
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
	b.Cleanup(func() { lock.Release() })
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
	b.Cleanup(func() {
		cancel()
		wg.Wait()
	})
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
	b.Cleanup(func() { c.Close() })
	w := agentapi.World{WorldSize: 1, LocalWorldSize: 1, NumWorkers: 1}
	op, err := c.Open(ctx, agentapi.Open{Dataset: agentapi.Dataset{Remote: "file://" + remote, Local: filepath.Join(dir, "cache"), BatchSize: 512},
		Job: "bench", World: w})
	if err != nil {
		b.Fatal(err)
	}
	return func() int {
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
