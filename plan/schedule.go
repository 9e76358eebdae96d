package plan

import (
	"fmt"
	"math"
	"sort"
)

// ShardRun is a maximal run of consecutive positions of a node's
// consumption order that fall in one shard.
type ShardRun struct {
	// Shard is the global shard ID.
	Shard int
	// Start is the position (index into Epoch.NodeOrder) of the run's first
	// sample; Len its sample count.
	Start, Len int64
}

// Schedule is one node's future use of shards in one epoch: what its cache
// prefetches, in order, and how far away each shard's next use is (for
// Belady eviction: evict the unleased shard whose next use is farthest).
// Positions index the node's consumption order (Epoch.NodeOrder). It takes
// 8 bytes per position of the node's share. A Schedule is immutable and
// safe for concurrent use.
type Schedule struct {
	shardOf   []int32 // shard of each position
	useStart  []int32 // per shard, its range in uses (len shards+1)
	uses      []int32 // positions, grouped by shard, ascending within a shard
	stepStart []int64 // position of the first sample of each step
}

// NodeSchedule computes node's Schedule for this epoch. For random batching
// it computes every rank of the node in one pass and keeps their worker
// slices for Worker.
func (e *Epoch) NodeSchedule(node int) (*Schedule, error) {
	order, steps, err := e.nodeOrder(node)
	if err != nil {
		return nil, err
	}
	if len(order) > math.MaxInt32 {
		return nil, fmt.Errorf("%w: node %d consumes %d samples, more than a schedule holds", ErrInvalid, node, len(order))
	}
	numShards := e.p.NumShards()
	sc := &Schedule{shardOf: make([]int32, len(order)), useStart: make([]int32, numShards+1), stepStart: steps}
	for i, x := range order {
		k, _, ok := e.p.layout.locate(x)
		if !ok {
			return nil, fmt.Errorf("plan: internal error: sample %d out of range", x)
		}
		sc.shardOf[i] = int32(k)
		sc.useStart[k+1]++
	}
	for k := range numShards {
		sc.useStart[k+1] += sc.useStart[k]
	}
	sc.uses = make([]int32, len(order))
	next := make([]int32, numShards)
	copy(next, sc.useStart[:numShards])
	for i, k := range sc.shardOf {
		sc.uses[next[k]] = int32(i)
		next[k]++
	}
	return sc, nil
}

// Len returns the number of samples the node consumes this epoch.
func (s *Schedule) Len() int64 { return int64(len(s.shardOf)) }

// ShardAt returns the shard of the sample at position pos.
func (s *Schedule) ShardAt(pos int64) int { return int(s.shardOf[pos]) }

// Runs returns the maximal runs of consecutive positions in one shard, in
// consumption order. It is computed on each call.
func (s *Schedule) Runs() []ShardRun {
	var out []ShardRun
	for i, k := range s.shardOf {
		if n := len(out); n > 0 && out[n-1].Shard == int(k) {
			out[n-1].Len++
		} else {
			out = append(out, ShardRun{Shard: int(k), Start: int64(i), Len: 1})
		}
	}
	return out
}

// Shards returns the distinct shards the node uses, in order of first use
// (the prefetch order).
func (s *Schedule) Shards() []int {
	type first struct {
		pos   int32
		shard int
	}
	var fs []first
	for k := range len(s.useStart) - 1 {
		if s.useStart[k] < s.useStart[k+1] {
			fs = append(fs, first{s.uses[s.useStart[k]], k})
		}
	}
	sort.Slice(fs, func(i, j int) bool { return fs[i].pos < fs[j].pos })
	out := make([]int, len(fs))
	for i, f := range fs {
		out[i] = f.shard
	}
	return out
}

// Steps returns the number of steps (batch indices per rank) of the epoch.
func (s *Schedule) Steps() int { return len(s.stepStart) }

// StepStart returns the position of the first sample of step t (Len() for
// t at or past the end): after every rank has finished t steps, the node has
// consumed positions [0, StepStart(t)).
func (s *Schedule) StepStart(t int) int64 {
	if t < 0 {
		return 0
	}
	if t >= len(s.stepStart) {
		return s.Len()
	}
	return s.stepStart[t]
}

// usesOf returns the ascending positions at which shard is used.
func (s *Schedule) usesOf(shard int) []int32 {
	if shard < 0 || shard >= len(s.useStart)-1 {
		return nil
	}
	return s.uses[s.useStart[shard]:s.useStart[shard+1]]
}

// NextUse returns the first position ≥ pos at which shard is used, or -1 if
// the node does not use it again this epoch.
func (s *Schedule) NextUse(shard int, pos int64) int64 {
	u := s.usesOf(shard)
	i := sort.Search(len(u), func(i int) bool { return int64(u[i]) >= pos })
	if i == len(u) {
		return -1
	}
	return int64(u[i])
}

// Uses returns how many samples of shard the node consumes at positions ≥
// pos.
func (s *Schedule) Uses(shard int, pos int64) int64 {
	u := s.usesOf(shard)
	i := sort.Search(len(u), func(i int) bool { return int64(u[i]) >= pos })
	return int64(len(u) - i)
}
