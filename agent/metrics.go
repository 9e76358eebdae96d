package agent

import (
	"context"
	"sort"
	"time"

	"github.com/sluicedata/sluice/metrics"
)

// usageTimeout bounds the cache-usage read of one scrape.
const usageTimeout = 2 * time.Second

// MetricsSnapshot returns the agent's live figures for package metrics:
// per job cursor (one per rank and DataLoader worker) what its stream
// delivered and waited, per cache root its bytes and limit. It is safe to
// call from any goroutine and takes the agent's locks only briefly.
func (a *Agent) MetricsSnapshot() metrics.Snapshot {
	var s metrics.Snapshot
	a.mu.Lock()
	for _, j := range a.jobs {
		name := j.ds.opts.Remote
		if name == "" {
			name = j.ds.opts.Local
		}
		if j.ds.opts.Split != "" {
			name += "/" + j.ds.opts.Split
		}
		for k, c := range j.cursors {
			st := c.Stats()
			s.Ranks = append(s.Ranks, metrics.Rank{
				Dataset: name, Rank: k[0], Samples: st.Samples, Bytes: st.Bytes, Wait: st.Wait,
				FirstSample: st.FirstSample, Hits: st.Hits, Misses: st.Misses, Prefetched: st.Prefetched,
			})
		}
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
	return s
}
