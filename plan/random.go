package plan

import (
	"fmt"
	"slices"
	"sync"

	"github.com/sluicedata/sluice/partition"
)

// randomEpoch plans batching_method random (spec §12.1) per rank: the
// partition gives a worker's canonical positions directly, the shuffle maps
// positions to big IDs, and the resampling maps big IDs to sample IDs.
type randomEpoch struct {
	c     *epochConfig
	rs    *resampled
	pt    *partition.Partition
	shape [5]int
	perms *permCache // the Planner's

	permOnce sync.Once
	perm     *permuter
	permErr  error

	// ranks caches each rank's worker slices: the first Worker call of a
	// rank computes all of its workers in one pass over the shuffle, and
	// each slice is handed out once.
	mu    sync.Mutex // guards ranks
	ranks map[[2]int]*rankSlices
}

type rankSlices struct {
	mu      sync.Mutex // held while computing
	done    bool
	err     error
	workers [][]int64 // a worker's slice is nil once handed out
}

func (e *Epoch) initRandom() error {
	rs, err := e.p.resample(&e.c, -1)
	if err != nil {
		return err
	}
	ps := partSpec{algo: e.c.partitionAlgo, n: rs.total(), ncn: e.c.ncn, shape: e.c.shape,
		batch: e.c.batchSize, dropFirst: e.c.sampleInEpoch, initialPhysicalNodes: e.c.initialPhysicalNodes}
	pt, err := newPartition(ps)
	if err != nil {
		return err
	}
	shape := pt.Shape()
	if per := int64(shape.BatchesPerWorker) * int64(shape.BatchSize); per*int64(shape.WorkersPerRank) > maxMaterialised {
		return fmt.Errorf("%w: each rank would get %d samples, more than %d", ErrInvalid, per*int64(shape.WorkersPerRank), int64(maxMaterialised))
	}
	e.rnd = &randomEpoch{c: &e.c, rs: rs, pt: pt, shape: shape.Dims(), ranks: make(map[[2]int]*rankSlices), perms: e.p.perms}
	if e.c.shuffle {
		// Every worker needs the shuffle; preparing it now makes an
		// impossible configuration (fewer samples than canonical nodes for
		// py1e, say) fail here rather than at the first Worker call.
		if _, err := e.rnd.permutation(); err != nil {
			return err
		}
	}
	return nil
}

// permutation returns the epoch's shuffle, prepared once.
func (r *randomEpoch) permutation() (*permuter, error) {
	r.permOnce.Do(func() {
		r.perm, r.permErr = r.perms.get(r.c.shuffleAlgo, r.rs.unitSizes(), r.c.ncn, r.c.seed, r.c.epoch, r.c.blockSize)
	})
	return r.perm, r.permErr
}

// mapIDs replaces each canonical position in ids (not -1) by its sample ID.
func (r *randomEpoch) mapIDs(ids []int64) error {
	if r.c.shuffle {
		perm, err := r.permutation()
		if err != nil {
			return err
		}
		if err := perm.apply(ids); err != nil {
			return err
		}
	}
	if !r.rs.identity {
		for i, x := range ids {
			if x >= 0 {
				ids[i] = r.rs.at(x)
			}
		}
	}
	return nil
}

// computeRanks computes the sample IDs of every worker of the given ranks of
// a node in one pass (one shuffle application over all of their positions)
// and returns them per rank.
func (r *randomEpoch) computeRanks(node int, ranks []int) ([][][]int64, error) {
	W := r.shape[2]
	per := r.shape[3] * r.shape[4]
	all := make([]int64, 0, len(ranks)*W*per)
	for _, rank := range ranks {
		for w := range W {
			all = r.pt.AppendWorker(all, node, rank, w)
		}
	}
	if err := r.mapIDs(all); err != nil {
		return nil, err
	}
	out := make([][][]int64, len(ranks))
	for i := range ranks {
		out[i] = make([][]int64, W)
		for w := range W {
			off := (i*W + w) * per
			out[i][w] = all[off : off+per : off+per]
		}
	}
	return out, nil
}

// entry returns the (possibly not yet computed) cache entry of a rank.
func (r *randomEpoch) entry(node, rank int) *rankSlices {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.ranks[[2]int{node, rank}]
	if e == nil {
		e = &rankSlices{}
		r.ranks[[2]int{node, rank}] = e
	}
	return e
}

// rankEntry returns the rank's cache entry, computed.
func (r *randomEpoch) rankEntry(node, rank int) (*rankSlices, error) {
	e := r.entry(node, rank)
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.done {
		var res [][][]int64
		res, e.err = r.computeRanks(node, []int{rank})
		if e.err == nil {
			e.workers = res[0]
		}
		e.done = true
	}
	return e, e.err
}

// computeNode computes, in one pass, every rank of node that is not cached
// yet: a node-level consumer (the schedule of a node's cache) then costs one
// pass over the node's share, not one per rank, and leaves each rank's
// slices for Worker.
func (r *randomEpoch) computeNode(node int) error {
	R := r.shape[1]
	entries := make([]*rankSlices, R)
	var missing []int
	for rank := range R {
		entries[rank] = r.entry(node, rank)
		entries[rank].mu.Lock() // in rank order: no deadlock with rankEntry
		if !entries[rank].done {
			missing = append(missing, rank)
		}
	}
	defer func() {
		for _, e := range entries {
			e.mu.Unlock()
		}
	}()
	if len(missing) == 0 {
		return nil
	}
	res, err := r.computeRanks(node, missing)
	for i, rank := range missing {
		e := entries[rank]
		e.done, e.err = true, err
		if err == nil {
			e.workers = res[i]
		}
	}
	return err
}

// worker hands out a worker's slice: the cached one the first time, a
// freshly computed one after that.
func (r *randomEpoch) worker(node, rank, worker int) ([]int64, error) {
	e, err := r.rankEntry(node, rank)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	ids := e.workers[worker]
	e.workers[worker] = nil
	e.mu.Unlock()
	if ids != nil {
		return ids, nil
	}
	return r.computeWorker(node, rank, worker)
}

// peek returns a copy of a worker's slice, leaving the cached slice for
// Worker to hand out.
func (r *randomEpoch) peek(node, rank, worker int) ([]int64, error) {
	e, err := r.rankEntry(node, rank)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	// A copy: the cached slice may be handed out (and modified) meanwhile.
	ids := slices.Clone(e.workers[worker])
	e.mu.Unlock()
	if ids != nil {
		return ids, nil
	}
	return r.computeWorker(node, rank, worker)
}

// computeWorker computes one worker's slice alone.
func (r *randomEpoch) computeWorker(node, rank, worker int) ([]int64, error) {
	ids := r.pt.AppendWorker(nil, node, rank, worker)
	if err := r.mapIDs(ids); err != nil {
		return nil, err
	}
	return ids, nil
}

// all builds the whole arrangement.
func (r *randomEpoch) all() (work, error) {
	s := r.shape
	per := s[3] * s[4]
	if total := int64(s[0]) * int64(s[1]) * int64(s[2]) * int64(per); total > maxMaterialised {
		return work{}, fmt.Errorf("%w: the epoch's arrangement has %d entries, more than %d; plan per worker instead", ErrInvalid, total, int64(maxMaterialised))
	}
	a := work{shape: s, data: r.pt.AppendAll(make([]int64, 0, s[0]*s[1]*s[2]*per))}
	if err := r.mapIDs(a.data); err != nil {
		return work{}, err
	}
	if len(a.data) != s[0]*s[1]*s[2]*per {
		return work{}, fmt.Errorf("plan: internal error: partition has %d entries, want %d", len(a.data), s[0]*s[1]*s[2]*per)
	}
	return a, nil
}
