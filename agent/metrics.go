package agent

import (
	"context"
	"sort"
	"time"

	"github.com/sluicedata/sluice/agentapi"
	"github.com/sluicedata/sluice/metrics"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/stream"
)

// usageTimeout bounds the cache-usage read of one scrape.
const usageTimeout = 2 * time.Second

// metricsName is the dataset label of o's figures: its remote (any
// credentials in it redacted) or local directory, and its split.
func metricsName(o *stream.Options) string {
	name := storage.RedactURL(o.Remote)
	if name == "" {
		name = o.Local
	}
	if o.Split != "" {
		name += "/" + o.Split
	}
	return name
}

// MetricsSnapshot returns the agent's live figures for package metrics:
// per job cursor (one per rank and DataLoader worker) what its stream
// delivered and waited, per cache root its bytes and limit. It is safe to
// call from any goroutine and takes the agent's locks only briefly.
func (a *Agent) MetricsSnapshot() metrics.Snapshot {
	var s metrics.Snapshot
	a.mu.Lock()
	for _, j := range a.jobs {
		name := metricsName(&j.ds.opts)
		for k, c := range j.cursors {
			st := c.Stats()
			s.Ranks = append(s.Ranks, metrics.Rank{
				Dataset: name, Rank: k[0], Samples: st.Samples, Bytes: st.Bytes, Wait: st.Wait,
				FirstSample: st.FirstSample, Hits: st.Hits, Misses: st.Misses, Prefetched: st.Prefetched,
			})
		}
	}
	for _, r := range a.retiredRanks {
		s.Ranks = append(s.Ranks, r)
	}
	a.mu.Unlock()
	sort.Slice(s.Ranks, func(i, j int) bool {
		if s.Ranks[i].Dataset != s.Ranks[j].Dataset {
			return s.Ranks[i].Dataset < s.Ranks[j].Dataset
		}
		return s.Ranks[i].Rank < s.Ranks[j].Rank
	})
	a.cacheMu.Lock()
	roots := make([]string, 0, len(a.caches))
	for r := range a.caches {
		roots = append(roots, r)
	}
	sort.Strings(roots)
	caches := make([]metrics.Cache, 0, len(roots))
	for _, r := range roots {
		c := a.caches[r]
		st := c.Stats()
		caches = append(caches, metrics.Cache{Dir: c.Dir(), Limit: c.Limit(), Downloads: st.Downloads,
			BytesFetched: st.BytesFetched, Evictions: st.Evictions})
	}
	live := make([]func(context.Context) (int64, error), len(roots))
	for i, r := range roots {
		live[i] = a.caches[r].Usage
	}
	a.cacheMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), usageTimeout)
	defer cancel()
	for i := range caches {
		if n, err := live[i](ctx); err == nil {
			caches[i].Bytes = n
		}
	}
	s.Caches = caches
	for _, rc := range a.retries.Snapshot() {
		s.Retries = append(s.Retries, metrics.Retry{Op: rc.Op, Cause: rc.Cause, N: rc.N})
	}
	return s
}

// metricsKey names a rank's series: its dataset's metrics name and rank.
type metricsKey struct {
	dataset string
	rank    int
}

// retireLocked adds the counters of cursors, job j's as it ends, to the
// retired figures of their dataset and rank (a.mu held), so that the
// scrape's counters, summed over the jobs reading a dataset's rank, never
// fall: Prometheus takes a fall for a reset and counts what is left as
// new (a rate spike). The gauges (prefetch depth, time to first sample)
// go with the job. One entry per dataset and rank the agent served.
func (a *Agent) retireLocked(j *job, cursors map[[2]int]*stream.Dataset) {
	if len(cursors) == 0 {
		return
	}
	if a.retiredRanks == nil {
		a.retiredRanks = map[metricsKey]metrics.Rank{}
	}
	name := metricsName(&j.ds.opts)
	for k, c := range cursors {
		st := c.Stats()
		key := metricsKey{name, k[0]}
		r := a.retiredRanks[key]
		r.Dataset, r.Rank = name, k[0]
		r.Samples += st.Samples
		r.Bytes += st.Bytes
		r.Wait += st.Wait
		r.Hits += st.Hits
		r.Misses += st.Misses
		a.retiredRanks[key] = r
	}
}

// jobMetrics answers a metrics request: the figures of job j's cursors of
// rank (every rank when nil) summed, the dataset's cache figures and
// store requests, and the agent's store retries.
func (a *Agent) jobMetrics(ctx context.Context, j *job, rank *int) agentapi.Metrics {
	out := agentapi.Metrics{Op: agentapi.OpMetrics}
	var first time.Duration
	a.mu.Lock()
	cursors := make([]*stream.Dataset, 0, len(j.cursors))
	for k, c := range j.cursors {
		if rank == nil || k[0] == *rank {
			cursors = append(cursors, c)
		}
	}
	a.mu.Unlock()
	for _, c := range cursors {
		st := c.Stats()
		out.Workers++
		out.Samples += st.Samples
		out.Bytes += st.Bytes
		out.WaitSeconds += st.Wait.Seconds()
		out.CacheHits += st.Hits
		out.CacheMisses += st.Misses
		out.PrefetchedShards += st.Prefetched
		if st.FirstSample > 0 && (first == 0 || st.FirstSample < first) {
			first = st.FirstSample
		}
	}
	out.FirstSampleSeconds = first.Seconds()
	// The cache's downloads are per cache dataset, which every cursor of
	// the dataset shares: count them once, from the shared dataset.
	ds := j.ds.ds.Stats()
	out.Downloads, out.BytesFetched, out.Evictions = ds.Downloads, ds.BytesFetched, ds.Evictions
	if c := j.ds.opts.Cache; c != nil {
		out.CacheLimit = c.Limit()
		uctx, cancel := context.WithTimeout(ctx, usageTimeout)
		if n, err := c.Usage(uctx); err == nil {
			out.CacheBytes = n
		}
		cancel()
	}
	for _, rc := range a.retries.Snapshot() {
		out.StoreRetries += rc.N
		out.RetriesBy = append(out.RetriesBy, agentapi.RetryCount{Op: rc.Op, Cause: rc.Cause, N: rc.N})
	}
	for _, t := range a.opts.StoreMetrics.Totals(metricsName(&j.ds.opts)) {
		out.Store = append(out.Store, agentapi.StoreOp{Op: t.Op, Requests: t.Requests, Errors: t.Errors, Seconds: t.Seconds})
	}
	return out
}
