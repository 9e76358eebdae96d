package plan

import (
	"fmt"
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
// Positions index the node's consumption order (Epoch.NodeOrder). A
// Schedule is immutable and safe for concurrent use.
type Schedule struct {
	runs      []ShardRun
	byShard   [][]int32 // run indices per shard, ascending
	stepStart []int64   // position of the first sample of each step
	total     int64
}

// NodeSchedule computes node's Schedule for this epoch.
func (e *Epoch) NodeSchedule(node int) (*Schedule, error) {
	s := e.c.shape
	if node < 0 || node >= s.Nodes {
		return nil, fmt.Errorf("%w: node %d outside %d nodes", ErrInvalid, node, s.Nodes)
	}
	B := e.c.batchSize
	R, W := s.RanksPerNode, s.WorkersPerRank
	ws := make([][]int64, R*W)
	for r := range R {
		for w := range W {
			ids, err := e.workerRO(node, r, w)
			if err != nil {
				return nil, err
			}
			ws[r*W+w] = ids
		}
	}
	sc := &Schedule{byShard: make([][]int32, e.p.NumShards())}
	nb := len(ws[0]) / B
	var pos int64
	for b := range nb {
		for w := range W {
			sc.stepStart = append(sc.stepStart, pos)
			for r := range R {
				for _, x := range ws[r*W+w][b*B : (b+1)*B] {
					if x < 0 {
						continue
					}
					k, _, ok := e.p.layout.locate(x)
					if !ok {
						return nil, fmt.Errorf("plan: internal error: sample %d out of range", x)
					}
					if n := len(sc.runs); n > 0 && sc.runs[n-1].Shard == k {
						sc.runs[n-1].Len++
					} else {
						sc.byShard[k] = append(sc.byShard[k], int32(len(sc.runs)))
						sc.runs = append(sc.runs, ShardRun{Shard: k, Start: pos, Len: 1})
					}
					pos++
				}
			}
		}
	}
	sc.total = pos
	return sc, nil
}

// Len returns the number of samples the node consumes this epoch.
func (s *Schedule) Len() int64 { return s.total }

// Runs returns the shard runs in consumption order. The slice is shared;
// do not modify it.
func (s *Schedule) Runs() []ShardRun { return s.runs }

// Shards returns the distinct shards the node uses, in order of first use
// (the prefetch order).
func (s *Schedule) Shards() []int {
	seen := make([]bool, len(s.byShard))
	var out []int
	for _, r := range s.runs {
		if !seen[r.Shard] {
			seen[r.Shard] = true
			out = append(out, r.Shard)
		}
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
		return s.total
	}
	return s.stepStart[t]
}

// NextUse returns the first position ≥ pos at which shard is used, or -1 if
// the node does not use it again this epoch.
func (s *Schedule) NextUse(shard int, pos int64) int64 {
	if shard < 0 || shard >= len(s.byShard) {
		return -1
	}
	idx := s.byShard[shard]
	i := sort.Search(len(idx), func(i int) bool {
		r := s.runs[idx[i]]
		return r.Start+r.Len > pos
	})
	if i == len(idx) {
		return -1
	}
	return max(s.runs[idx[i]].Start, pos)
}

// Uses returns how many samples of shard the node consumes at positions ≥
// pos.
func (s *Schedule) Uses(shard int, pos int64) int64 {
	if shard < 0 || shard >= len(s.byShard) {
		return 0
	}
	var n int64
	for _, i := range s.byShard[shard] {
		r := s.runs[i]
		if end := r.Start + r.Len; end > pos {
			n += end - max(r.Start, pos)
		}
	}
	return n
}
