package cli

import (
	"fmt"
	"math"
	"strings"

	"github.com/sluicedata/sluice/cache"
	"github.com/sluicedata/sluice/sim"
	"github.com/sluicedata/sluice/stream"
)

// simMaxVary bounds the values of one --vary list: each is a whole
// simulation, played one after another.
const simMaxVary = 64

// simDefaultMaxMemory is --max-memory's default.
const simDefaultMaxMemory = "8gb"

// The memory a simulation takes, per part of its input. Measured with
// /usr/bin/time (maximum RSS) on this tree: 5M samples, 39k shards,
// one node 675 MB, 20 nodes × 8 ranks × 8 workers 585–650 MB, with
// workers taking turns 0.8–1.0 GB; 1,000 nodes over 8,000 shards 438 MB;
// 100,000 nodes over 100 shards 1.48 GB; 10⁶ workers 368 MB. The
// estimate is above each of these.
const (
	simBytesPerSample     = 160   // the epoch's plan and every node's schedule
	simBytesPerNodeShard  = 64    // a node's cache state per shard
	simBytesPerNode       = 16384 // a node's fixed state
	simBytesPerConsumer   = 1024  // one iterator's walk and its bookkeeping
	simBytesPerShard      = 512   // the dataset and the plan's shard tables
	simBytesBase          = 64 << 20
	simTurnsFactor        = 1.5 // workers taking turns keep their windows
	simBytesPerKeptStep   = 8   // --steps-csv and --plot keep every node's wait per step, and 24 bytes per step for the run
	simMaxDatasetBytesSum = math.MaxInt64
)

// simEstimateMemory estimates the bytes sim.Run takes for c (one
// setting; the settings of --vary run one after another).
func simEstimateMemory(c *sim.Config) float64 {
	var samples float64
	for _, s := range c.Dataset.Shards {
		samples += float64(s.Samples)
	}
	if c.Plan.EpochSize > 0 {
		samples = math.Max(samples, float64(c.Plan.EpochSize))
	}
	nodes := float64(c.Shape.Nodes)
	if c.Nodes != nil {
		nodes = float64(len(c.Nodes))
	}
	shards := float64(len(c.Dataset.Shards))
	consumers := float64(c.Shape.RanksPerNode)
	if !c.RankIterator {
		consumers *= float64(c.Shape.WorkersPerRank)
	}
	m := simBytesPerSample*samples + simBytesPerNodeShard*nodes*shards + simBytesPerNode*nodes +
		simBytesPerConsumer*nodes*consumers + simBytesPerShard*shards
	if c.OrderAdmissions {
		m *= simTurnsFactor
	}
	if c.KeepSteps {
		global := float64(c.Plan.BatchSize) * float64(c.Shape.Nodes) * float64(c.Shape.RanksPerNode)
		steps := math.Ceil(samples/math.Max(global, 1)) * float64(max(c.Epochs, 1))
		m += simBytesPerKeptStep*steps*nodes + 3*simBytesPerKeptStep*steps
	}
	return m + simBytesBase
}

// checkSimulateConfig refuses a setting before it is simulated: one no
// real reader accepts (a cache limit below what a rank's stream needs to
// start), one whose simulation would take more than maxMemory bytes,
// or one with no epoch to play. setting names the --vary value, if any.
func checkSimulateConfig(c *sim.Config, maxMemory int64, setting string) error {
	where := "simulate: "
	if setting != "" {
		where = "simulate: --vary " + setting + ": "
	}
	for _, n := range []struct {
		flag  string
		value int
	}{{"nodes", c.Shape.Nodes}, {"ranks-per-node", c.Shape.RanksPerNode}, {"workers-per-rank", c.Shape.WorkersPerRank}, {"batch-size", c.Plan.BatchSize}} {
		if n.value < 1 {
			return fmt.Errorf("%s--%s %d: must be at least 1", where, n.flag, n.value)
		}
	}
	if c.Epochs < 1 {
		return fmt.Errorf("%s--epochs %d: at least 1 epoch must be played", where, c.Epochs)
	}
	if c.CacheLimit > 0 {
		if least, _, why, _ := simLeastLimits(c); least > float64(c.CacheLimit) {
			return fmt.Errorf("%s--cache-limit %d bytes (%s) is below what the real cache accepts for this run: at least %.0f bytes (%s): %s",
				where, c.CacheLimit, cache.FormatBytes(c.CacheLimit), least, cache.FormatBytes(int64(math.Min(least, math.MaxInt64/2))), why)
		}
	}
	if est := simEstimateMemory(c); est > float64(maxMemory) {
		var samples int64
		for _, s := range c.Dataset.Shards {
			samples += s.Samples
		}
		samples = max(samples, c.Plan.EpochSize)
		return fmt.Errorf("%sthis simulation would take about %s of memory (%d samples per epoch, %d shards, %d nodes × %d ranks × %d workers), more than --max-memory %s: raise --max-memory if the machine has it",
			where, cache.FormatBytes(int64(math.Min(est, math.MaxInt64/2))), samples, len(c.Dataset.Shards),
			c.Shape.Nodes, c.Shape.RanksPerNode, c.Shape.WorkersPerRank, cache.FormatBytes(maxMemory))
	}
	return nil
}

// simLeastLimits are the smallest cache limits the real code accepts for
// c's run: any is the least of any reader (a Go stream.Epoch holds a
// shard per worker of its rank, whether read per rank as sluice stream
// does or per worker: stream.Dataset.NewEpoch), agent the agent's (it
// lets every worker of every local rank hold up to 3 shards:
// agent/conn.go's begin); each plus one shard being fetched and the
// index. why and whyAgent say how they were computed.
func simLeastLimits(c *sim.Config) (anyLeast, agentLeast float64, why, whyAgent string) {
	var foot int64
	for _, s := range c.Dataset.Shards {
		foot = max(foot, s.Footprint)
	}
	least := func(holders int) float64 {
		return float64(c.Dataset.IndexBytes) + float64(holders+1)*float64(foot)
	}
	tail := fmt.Sprintf(", plus one shard being fetched, of up to %d bytes each, plus the index (%d bytes)", foot, c.Dataset.IndexBytes)
	anyLeast = least(c.Shape.WorkersPerRank)
	why = fmt.Sprintf("a rank's stream holds a shard per worker (%d)", c.Shape.WorkersPerRank) + tail
	agentLeast = least(c.Shape.RanksPerNode * c.Shape.WorkersPerRank * 3)
	whyAgent = fmt.Sprintf("the agent lets each of %d ranks × %d workers hold up to 3 shards", c.Shape.RanksPerNode, c.Shape.WorkersPerRank) + tail
	return anyLeast, agentLeast, why, whyAgent
}

// checkUniformSizes refuses a synthetic dataset whose byte counts do not
// fit in an int64 (a shard's, or the dataset's in all).
func checkUniformSizes(sizes []int64, perSample int64) error {
	var total float64
	for i, n := range sizes {
		b := float64(n) * float64(perSample)
		if b >= simMaxDatasetBytesSum {
			return fmt.Errorf("simulate: shard %d: %d samples × %d bytes (--sample-bytes) is more bytes than a shard can hold", i, n, perSample)
		}
		total += b
	}
	if total >= simMaxDatasetBytesSum {
		return fmt.Errorf("simulate: %d shards of %d bytes per sample (--sample-bytes) are %.3g bytes, more than a byte count holds", len(sizes), perSample, total)
	}
	return nil
}

// parseSimRate reads a bandwidth ("1.25gb", "100mb/s"); "" and "none" mean
// unlimited, and 0 (which would move no data) is refused.
func parseSimRate(s string) (float64, error) {
	t := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(s)), "/s")
	switch t {
	case "", "none", "unlimited":
		return 0, nil
	}
	n, err := stream.ParseBytes(t)
	if err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, fmt.Errorf("a rate of %q moves no data: give a positive rate, or none for no limit", s)
	}
	return float64(n), nil
}

// parseSimCacheLimit reads a cache limit; "none" and 0 mean no limit, as
// in sluice stream.
func parseSimCacheLimit(s string) (int64, error) {
	if s == "" || s == "none" {
		return 0, nil
	}
	return stream.ParseBytes(s)
}

// simAgentNote returns a note when c models the agent (DataLoader
// workers) under a cache limit the agent refuses though a Go stream
// accepts it, else "".
func simAgentNote(c *sim.Config) string {
	if c.RankIterator || c.CacheLimit <= 0 {
		return ""
	}
	if _, least, _, why := simLeastLimits(c); least > float64(c.CacheLimit) {
		return fmt.Sprintf("note: the agent (the Python client) refuses --cache-limit %d for this run: it needs at least %.0f bytes (%s); a Go stream.Epoch read per worker accepts it",
			c.CacheLimit, least, why)
	}
	return ""
}

// splitVary splits --vary's values at commas; a step_time distribution
// ("normal:20ms,5ms", "uniform:10ms,30ms") keeps its own comma, so
// step_time=10ms,normal:20ms,5ms is two values.
func splitVary(key, v string) []string {
	parts := strings.Split(v, ",")
	if key != "step_time" {
		return parts
	}
	var out []string
	for i := 0; i < len(parts); i++ {
		p := parts[i]
		if (strings.HasPrefix(p, "normal:") || strings.HasPrefix(p, "uniform:")) && i+1 < len(parts) {
			p += "," + parts[i+1]
			i++
		}
		out = append(out, p)
	}
	return out
}
