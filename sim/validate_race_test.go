package sim_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/plan"
	"github.com/sluicedata/sluice/sim"
)

// workerShards returns, per DataLoader worker of rank 0, the shards of
// its samples in its order (the planner's worker order, as the workers
// read them), limited to its first n samples (n < 0: all).
func workerShards(t *testing.T, idx *format.Index, c *sim.Config, n int) [][]int {
	t.Helper()
	sizes := make([]int64, len(idx.Shards))
	for i, sh := range idx.Shards {
		sizes[i] = int64(sh.Samples)
	}
	opts := c.Plan
	p, err := plan.New([]plan.Stream{{ShardSizes: sizes}}, &opts)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := p.NewTracker().Begin(c.Shape)
	if err != nil {
		t.Fatal(err)
	}
	ep, err := p.Epoch(spec)
	if err != nil {
		t.Fatal(err)
	}
	out := make([][]int, c.Shape.WorkersPerRank)
	for w := range c.Shape.WorkersPerRank {
		ids, err := ep.Worker(0, 0, w)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			if n >= 0 && len(out[w]) == n {
				break
			}
			if id < 0 {
				continue
			}
			sh, _, err := p.Locate(id)
			if err != nil {
				t.Fatal(err)
			}
			out[w] = append(out[w], sh)
		}
	}
	return out
}

// burstRace is the time to first batch a run should measure when the
// first batch's shards go out in a burst of simultaneous requests whose
// order on the link is a race: with the burst's k shard requests served
// one after another in a random order, the m the first batch needs are
// all in at the expected last of m of k, the m(k+1)/(m+1)-th completion
// (the model's rule within one prefetcher's burst, TestBurstRace). The
// model serves the bursts of different workers in the workers' order,
// the best case; this is the mean. The burst is the shard requests that
// reached the store before a response could be back (within the store's
// latency of the first), counted from the start as the model sends them
// (Config.WorkerStart); lo and hi are its best and worst order (the first
// batch's shards first, or last). ok is false when the first
// batch's shards are not all in that burst.
func burstRace(t *testing.T, idx *format.Index, c *sim.Config, m measured) (want, lo, hi time.Duration, k, need int, ok bool) {
	t.Helper()
	byName := map[string]int{}
	for i, sh := range idx.Shards {
		byName[sh.RawData.Basename] = i
	}
	first := map[int]bool{}
	for _, sh := range workerShards(t, idx, c, c.Plan.BatchSize)[0] {
		first[sh] = true
	}
	var sent, bound time.Time
	var bytes int64
	in := map[int]bool{}
	for _, tm := range m.timings {
		sh, isShard := byName[filepath.Base(tm.Path)]
		if !isShard {
			continue
		}
		if sent.IsZero() {
			sent, bound = tm.Arrived, tm.Arrived.Add(c.Store.Latency)
		}
		if !tm.Arrived.Before(bound) {
			break
		}
		k++
		bytes += idx.Shards[sh].RawData.Bytes
		in[sh] = true
	}
	for sh := range first {
		if !in[sh] {
			return 0, 0, 0, k, len(first), false
		}
	}
	need = len(first)
	transfer := time.Duration(float64(bytes) / float64(k) / c.Store.BandwidthPerNode * float64(time.Second))
	// The model's workers send their first requests at the start (after
	// WorkerStart): a run that sends them later is late by as much.
	base := c.WorkerStart + c.Store.Latency
	want = base + time.Duration(float64(need*(k+1))/float64(need+1)*float64(transfer))
	return want, base + time.Duration(need)*transfer, base + time.Duration(k)*transfer, k, need, true
}
