package sim

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"

	"github.com/sluicedata/sluice/plan"
)

// NodeReport is one node's figures.
type NodeReport struct {
	// Node is the node's index.
	Node int `json:"node"`
	// TimeToFirstBatchS is the time from the start of the iteration (the
	// index fetched) to the node's first batch being ready.
	TimeToFirstBatchS float64 `json:"time_to_first_batch_s"`
	// StalledSteps counts the steps after the first whose batch was not
	// ready when the previous step ended; StallS is their total wait and
	// MaxStallS the longest.
	StalledSteps int     `json:"stalled_steps"`
	StallS       float64 `json:"stall_s"`
	MaxStallS    float64 `json:"max_stall_s"`
	// InputWaitFraction is (time to first batch + stalls) / wall time.
	InputWaitFraction float64 `json:"input_wait_fraction"`
	// Samples is the number of samples the node consumed;
	// SamplesPerS that over the wall time.
	Samples     int64   `json:"samples"`
	SamplesPerS float64 `json:"samples_per_s"`
	// StoreBytes and StoreRequests are what the node downloaded,
	// index.json included; Downloads counts shard file downloads.
	StoreBytes    int64 `json:"store_bytes"`
	StoreRequests int64 `json:"store_requests"`
	Downloads     int64 `json:"downloads"`
	// Evictions counts shards evicted; Hits and Misses shard openings that
	// found the shard ready or waited.
	Evictions int64 `json:"evictions"`
	Hits      int64 `json:"cache_hits"`
	Misses    int64 `json:"cache_misses"`
	// PeakCacheBytes is the most the cache held (the index and its
	// ETag stamp included).
	PeakCacheBytes int64 `json:"peak_cache_bytes"`
	// StepWaitsS holds each step's input wait (Config.KeepSteps).
	StepWaitsS []float64 `json:"step_waits_s,omitempty"`
}

// Report is a run's figures: per node, and for the synchronous run as a
// whole (a step begins when every node's batch is ready).
type Report struct {
	// Nodes holds the simulated nodes' figures.
	Nodes []NodeReport `json:"nodes"`
	// Steps is the number of steps played (all epochs).
	Steps int `json:"steps"`
	// WallS is the time from the start of the iteration to the end of
	// the last step.
	WallS float64 `json:"wall_s"`
	// IndexS is the time to fetch index.json before the iteration.
	IndexS float64 `json:"index_s"`
	// TimeToFirstBatchS is the slowest node's.
	TimeToFirstBatchS float64 `json:"time_to_first_batch_s"`
	// StalledSteps, StallS and MaxStallS are the run's: a step stalls
	// when any node's batch is late.
	StalledSteps int     `json:"stalled_steps"`
	StallS       float64 `json:"stall_s"`
	MaxStallS    float64 `json:"max_stall_s"`
	// InputWaitFraction is (time to first batch + stalls) / wall time.
	InputWaitFraction float64 `json:"input_wait_fraction"`
	// Samples and SamplesPerS are over every simulated node.
	Samples     int64   `json:"samples"`
	SamplesPerS float64 `json:"samples_per_s"`
	// StoreBytes and StoreRequests sum every simulated node's.
	StoreBytes    int64 `json:"store_bytes"`
	StoreRequests int64 `json:"store_requests"`
	// PeakCacheBytes is the largest node's peak.
	PeakCacheBytes int64 `json:"peak_cache_bytes"`
	// StepStartsS holds each step's start (when it began to wait for its
	// batch) from the start of the iteration, StepWaitsS the run's wait
	// for it (the slowest node's) and StepSamples its samples over the
	// simulated nodes (Config.KeepSteps).
	StepStartsS []float64 `json:"step_starts_s,omitempty"`
	StepWaitsS  []float64 `json:"step_waits_s,omitempty"`
	StepSamples []int64   `json:"step_samples,omitempty"`
}

// Run plays the configuration on a virtual clock: the real planner's
// per-node schedules, consumed step by step, each node's cache evicting
// by package cache's policy and its prefetchers walking by package
// stream/prefetch's Walk.
func Run(ctx context.Context, c *Config) (*Report, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	sizes := make([]int64, len(c.Dataset.Shards))
	for i, s := range c.Dataset.Shards {
		sizes[i] = s.Samples
	}
	opts := c.Plan
	streams, err := c.planStreams(sizes)
	if err != nil {
		return nil, err
	}
	p, err := plan.New(streams, &opts)
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	ids := c.Nodes
	if ids == nil {
		ids = make([]int, c.Shape.Nodes)
		for i := range ids {
			ids[i] = i
		}
	}
	nodes := make([]*node, len(ids))
	for i, id := range ids {
		nodes[i] = newNode(c, id)
	}
	start := 0.0
	for _, nd := range nodes {
		start = math.Max(start, nd.linkFree)
	}
	rep := &Report{IndexS: start}
	for i, nd := range nodes {
		nd.rep.Node = ids[i]
		nd.rep.TimeToFirstBatchS = -1
	}
	seed := int64(plan.DefaultShuffleSeed)
	if opts.ShuffleSeed != nil {
		seed = *opts.ShuffleSeed
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 0x5eed))
	tr := p.NewTracker()
	epochs := max(c.Epochs, 1)
	stp := newStepper(c, nodes)
	defer stp.close()
	t := start
	first := true
	for range epochs {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("sim: %w", err)
		}
		spec, err := tr.Begin(c.Shape)
		if err != nil {
			return nil, fmt.Errorf("sim: %w", err)
		}
		ep, err := p.Epoch(spec)
		if err != nil {
			return nil, fmt.Errorf("sim: %w", err)
		}
		if err := schedules(ep, c, nodes); err != nil {
			return nil, err
		}
		steps := 0
		for _, nd := range nodes {
			steps = max(steps, nd.sc.Steps())
		}
		for s := range steps {
			if s%1024 == 0 {
				if err := ctx.Err(); err != nil {
					return nil, fmt.Errorf("sim: %w", err)
				}
			}
			ready := t
			rs := stp.step(s, t)
			var stepSamples int64
			for i, nd := range nodes {
				r := rs[i]
				w := math.Max(r-t, 0)
				if first {
					nd.rep.TimeToFirstBatchS = r - start
				} else if w > 0 {
					nd.rep.StalledSteps++
					nd.rep.StallS += w
					nd.rep.MaxStallS = math.Max(nd.rep.MaxStallS, w)
				}
				if c.KeepSteps {
					nd.rep.StepWaitsS = append(nd.rep.StepWaitsS, w)
				}
				n := nd.sc.StepStart(s+1) - nd.sc.StepStart(s)
				nd.rep.Samples += n
				stepSamples += n
				ready = math.Max(ready, r)
			}
			w := ready - t
			if c.KeepSteps {
				rep.StepStartsS = append(rep.StepStartsS, t-start)
				rep.StepWaitsS = append(rep.StepWaitsS, w)
				rep.StepSamples = append(rep.StepSamples, stepSamples)
			}
			if first {
				rep.TimeToFirstBatchS = w
				first = false
			} else if w > 0 {
				rep.StalledSteps++
				rep.StallS += w
				rep.MaxStallS = math.Max(rep.MaxStallS, w)
			}
			var st float64
			if c.StepTime != nil {
				st = c.StepTime.Draw(rng).Seconds()
			}
			t = ready + st
			rep.Steps++
		}
		for _, nd := range nodes {
			nd.release(-1)
			nd.openQueues(t) // the epoch's iterators end
		}
	}
	rep.WallS = t - start
	for _, nd := range nodes {
		r := &nd.rep
		r.StoreBytes, r.StoreRequests, r.Downloads = nd.bytes, nd.requests, nd.downloads
		r.Evictions, r.Hits, r.Misses, r.PeakCacheBytes = nd.evictions, nd.hits, nd.misses, nd.peak
		if rep.WallS > 0 {
			r.InputWaitFraction = (r.TimeToFirstBatchS + r.StallS) / rep.WallS
			r.SamplesPerS = float64(r.Samples) / rep.WallS
		}
		rep.Samples += r.Samples
		rep.StoreBytes += r.StoreBytes
		rep.StoreRequests += r.StoreRequests
		rep.PeakCacheBytes = max(rep.PeakCacheBytes, r.PeakCacheBytes)
		rep.Nodes = append(rep.Nodes, *r)
	}
	if rep.WallS > 0 {
		rep.InputWaitFraction = (rep.TimeToFirstBatchS + rep.StallS) / rep.WallS
		rep.SamplesPerS = float64(rep.Samples) / rep.WallS
	}
	return rep, nil
}

// schedules computes every simulated node's schedule for the epoch, in
// parallel, and installs it.
func schedules(ep *plan.Epoch, c *Config, nodes []*node) error {
	errs := make([]error, len(nodes))
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i, nd := range nodes {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			sc, err := ep.NodeSchedule(nd.id)
			if err != nil {
				errs[i] = fmt.Errorf("sim: node %d: %w", nd.id, err)
				return
			}
			nd.beginEpoch(sc)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
