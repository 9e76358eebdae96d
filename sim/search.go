package sim

import (
	"context"
)

// LimitSearch is the outcome of MinCacheLimit.
type LimitSearch struct {
	// Limit is the smallest cache limit found (within one largest shard
	// footprint) that stalls no more than an unlimited cache: the steps
	// that stall then are the store's doing, not the cache's.
	Limit int64 `json:"min_cache_limit"`
	// StallFree reports whether the run stalls no step (after the first)
	// even then.
	StallFree bool `json:"stall_free"`
	// Unlimited is the run without a limit (its peak cache use bounds the
	// search).
	Unlimited *Report `json:"-"`
	// Runs is the number of simulations the search took.
	Runs int `json:"runs"`
}

// MinCacheLimit searches the smallest per-node cache limit at which the
// configuration stalls no more (steps, and seconds) than without a limit,
// by bisection between the
// least limit the cache accepts (every consumer's lease and fetch) and the
// peak use without a limit, to the resolution of one shard footprint.
// c.CacheLimit is ignored. Set c.Nodes to search on fewer nodes (nodes
// of one run are alike up to their share of the plan).
func MinCacheLimit(ctx context.Context, c *Config) (*LimitSearch, error) {
	cc := *c
	cc.CacheLimit = 0
	cc.KeepSteps = false
	free, err := Run(ctx, &cc)
	if err != nil {
		return nil, err
	}
	res := &LimitSearch{Unlimited: free, Runs: 1, StallFree: free.StalledSteps == 0}
	ok := func(r *Report) bool {
		return r.StalledSteps <= free.StalledSteps && r.StallS <= free.StallS*(1+1e-9)+1e-9
	}
	var foot int64
	for _, s := range c.Dataset.Shards {
		foot = max(foot, s.Footprint)
	}
	foot = max(foot, 1)
	lo := c.Dataset.IndexBytes + int64(2*cc.consumers()+1)*foot
	hi := max(free.PeakCacheBytes, lo)
	// Invariant: hi does not stall; lo-1 is below what the cache accepts.
	if lo < hi {
		cc.CacheLimit = lo
		r, err := Run(ctx, &cc)
		res.Runs++
		if err != nil {
			return nil, err
		}
		if ok(r) {
			hi = lo
		}
	}
	for hi-lo > foot {
		mid := lo + (hi-lo)/2
		cc.CacheLimit = mid
		r, err := Run(ctx, &cc)
		res.Runs++
		if err != nil {
			return nil, err
		}
		if ok(r) {
			hi = mid
		} else {
			lo = mid
		}
	}
	res.Limit = hi
	return res, nil
}
