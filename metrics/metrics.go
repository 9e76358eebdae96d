// Package metrics exposes Sluice's live input-pipeline figures in the
// Prometheus format, with the official client: per dataset and rank the
// samples and bytes delivered, the time consumers waited, the shards
// prefetched ahead of consumption, cache hits, misses, evictions and
// downloads, time to first sample; per cache its bytes and limit; per store
// operation a latency histogram.
//
// Figures are read when scraped (a Collector over a Snapshot function), so
// the read path pays nothing for them; only store requests are timed as
// they happen (InstrumentBucket), once per request.
//
// Listen opens the address a user enables (a loopback TCP port or a unix
// socket); it refuses any other address unless forced. Nothing is served
// unless asked for.
package metrics

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// ErrNotLoopback is matched (errors.Is) by Listen's error for an address
// other programs on the network could reach.
var ErrNotLoopback = errors.New("metrics: address is not loopback")

// Rank is one consumer's figures: a rank of a job on a dataset, its
// DataLoader workers together.
type Rank struct {
	// Dataset names the dataset (its remote URL or local directory).
	Dataset string
	// Rank is the global rank.
	Rank int
	// Samples and Bytes count what was delivered.
	Samples, Bytes int64
	// Wait is the time the consumers waited for shards.
	Wait time.Duration
	// FirstSample is the time to the first sample (0 before it).
	FirstSample time.Duration
	// Hits and Misses count shard openings that found the shard local or
	// waited for it.
	Hits, Misses int64
	// Prefetched is the number of shards fetched ahead of consumption
	// and not reached yet (the data-readiness signal).
	Prefetched int64
}

// Cache is one node cache's figures.
type Cache struct {
	// Dir is the cache root.
	Dir string
	// Bytes is what the directory holds or has reserved; Limit its limit
	// (0: none).
	Bytes, Limit int64
	// Downloads, BytesFetched and Evictions are this process's.
	Downloads, BytesFetched, Evictions int64
}

// Retry is the number of store retries of one operation for one cause
// (storage/retry.Count).
type Retry struct {
	Op, Cause string
	N         int64
}

// Snapshot is what a scrape reports.
type Snapshot struct {
	Ranks   []Rank
	Caches  []Cache
	Retries []Retry
}

// Collector is a prometheus.Collector over a Snapshot function, called
// once per scrape.
type Collector struct {
	snap func() Snapshot

	samples, bytes, wait, first, hits, misses, ahead  *prometheus.Desc
	cacheBytes, cacheLimit, downloads, fetched, evict *prometheus.Desc
	retries                                           *prometheus.Desc
}

// NewCollector returns a Collector calling snap at each scrape. snap must
// be safe to call from any goroutine.
func NewCollector(snap func() Snapshot) *Collector {
	rl := []string{"dataset", "rank"}
	cl := []string{"cache"}
	return &Collector{
		snap:       snap,
		samples:    prometheus.NewDesc("sluice_samples_delivered_total", "Samples delivered to the rank's consumers.", rl, nil),
		bytes:      prometheus.NewDesc("sluice_bytes_delivered_total", "Record bytes delivered to the rank's consumers.", rl, nil),
		wait:       prometheus.NewDesc("sluice_consumer_wait_seconds_total", "Time the rank's consumers waited for shards.", rl, nil),
		first:      prometheus.NewDesc("sluice_time_to_first_sample_seconds", "Time from the start of the iteration to its first sample.", rl, nil),
		hits:       prometheus.NewDesc("sluice_cache_hits_total", "Shard openings that found the shard local.", rl, nil),
		misses:     prometheus.NewDesc("sluice_cache_misses_total", "Shard openings that waited for a fetch.", rl, nil),
		ahead:      prometheus.NewDesc("sluice_prefetch_ahead_shards", "Shards fetched ahead of consumption, not reached yet.", rl, nil),
		cacheBytes: prometheus.NewDesc("sluice_cache_bytes", "Bytes the cache directory holds or has reserved.", cl, nil),
		cacheLimit: prometheus.NewDesc("sluice_cache_limit_bytes", "The cache's limit (0: none).", cl, nil),
		downloads:  prometheus.NewDesc("sluice_cache_downloads_total", "Files this process downloaded into the cache.", cl, nil),
		fetched:    prometheus.NewDesc("sluice_cache_fetched_bytes_total", "Bytes this process downloaded into the cache.", cl, nil),
		evict:      prometheus.NewDesc("sluice_cache_evictions_total", "Shards this process evicted.", cl, nil),
		retries: prometheus.NewDesc("sluice_store_retries_total",
			"Store requests retried after a failed attempt, by operation and cause (throttled, timeout, stall, server, other).",
			[]string{"op", "cause"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.samples, c.bytes, c.wait, c.first, c.hits, c.misses, c.ahead,
		c.cacheBytes, c.cacheLimit, c.downloads, c.fetched, c.evict, c.retries} {
		ch <- d
	}
}

// Collect implements prometheus.Collector. Ranks reported twice (by
// several workers) are summed.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.snap()
	type key struct {
		ds   string
		rank int
	}
	sum := map[key]*Rank{}
	var order []key
	for _, r := range s.Ranks {
		k := key{r.Dataset, r.Rank}
		t, ok := sum[k]
		if !ok {
			t = &Rank{Dataset: r.Dataset, Rank: r.Rank}
			sum[k] = t
			order = append(order, k)
		}
		t.Samples += r.Samples
		t.Bytes += r.Bytes
		t.Wait += r.Wait
		t.Hits += r.Hits
		t.Misses += r.Misses
		t.Prefetched += r.Prefetched
		if r.FirstSample > 0 && (t.FirstSample == 0 || r.FirstSample < t.FirstSample) {
			t.FirstSample = r.FirstSample
		}
	}
	for _, k := range order {
		r := sum[k]
		l := []string{r.Dataset, strconv.Itoa(r.Rank)}
		ch <- prometheus.MustNewConstMetric(c.samples, prometheus.CounterValue, float64(r.Samples), l...)
		ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.CounterValue, float64(r.Bytes), l...)
		ch <- prometheus.MustNewConstMetric(c.wait, prometheus.CounterValue, r.Wait.Seconds(), l...)
		ch <- prometheus.MustNewConstMetric(c.first, prometheus.GaugeValue, r.FirstSample.Seconds(), l...)
		ch <- prometheus.MustNewConstMetric(c.hits, prometheus.CounterValue, float64(r.Hits), l...)
		ch <- prometheus.MustNewConstMetric(c.misses, prometheus.CounterValue, float64(r.Misses), l...)
		ch <- prometheus.MustNewConstMetric(c.ahead, prometheus.GaugeValue, float64(r.Prefetched), l...)
	}
	for _, cc := range s.Caches {
		ch <- prometheus.MustNewConstMetric(c.cacheBytes, prometheus.GaugeValue, float64(cc.Bytes), cc.Dir)
		ch <- prometheus.MustNewConstMetric(c.cacheLimit, prometheus.GaugeValue, float64(cc.Limit), cc.Dir)
		ch <- prometheus.MustNewConstMetric(c.downloads, prometheus.CounterValue, float64(cc.Downloads), cc.Dir)
		ch <- prometheus.MustNewConstMetric(c.fetched, prometheus.CounterValue, float64(cc.BytesFetched), cc.Dir)
		ch <- prometheus.MustNewConstMetric(c.evict, prometheus.CounterValue, float64(cc.Evictions), cc.Dir)
	}
	for _, r := range s.Retries {
		ch <- prometheus.MustNewConstMetric(c.retries, prometheus.CounterValue, float64(r.N), r.Op, r.Cause)
	}
}

// Handler serves reg's metrics in the Prometheus text format.
func Handler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Listen opens a metrics listener on addr: "unix:PATH" for a unix socket
// (created owner-only), else HOST:PORT, which must be a loopback address
// ("127.0.0.1:9400", "[::1]:9400", "localhost:9400") unless allowRemote.
func Listen(addr string, allowRemote bool) (net.Listener, error) {
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		if path == "" {
			return nil, fmt.Errorf("metrics: %q: empty socket path", addr)
		}
		if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
			// A socket left by a dead process: nobody can be listening
			// on it if dialling fails.
			if c, err := net.Dial("unix", path); err == nil {
				c.Close()
				return nil, fmt.Errorf("metrics: %s: a process is listening there", path)
			}
			_ = os.Remove(path)
		}
		old := umask(0o077)
		ln, err := net.Listen("unix", path)
		umask(old)
		if err != nil {
			return nil, fmt.Errorf("metrics: %w", err)
		}
		return ln, nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: address %q: %w", addr, err)
	}
	if !allowRemote && !loopback(host) {
		return nil, fmt.Errorf("%w: %q (use 127.0.0.1:PORT or unix:PATH, or force a public address explicitly)", ErrNotLoopback, addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return ln, nil
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
