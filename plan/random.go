package plan

import (
	"fmt"
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

	permOnce sync.Once
	perm     *permuter
	permErr  error

	// ranks caches each rank's worker slices: the first Worker call of a
	// rank computes all of its workers in one pass over the shuffle, and
	// each slice is handed out once.
	mu    sync.Mutex
	ranks map[[2]int]*rankSlices
}

type rankSlices struct {
	once    sync.Once
	err     error
	workers [][]int64 // nil once handed out
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
	e.rnd = &randomEpoch{c: &e.c, rs: rs, pt: pt, shape: pt.Shape().Dims(), ranks: make(map[[2]int]*rankSlices)}
	return nil
}

// permutation returns the epoch's shuffle, prepared once.
func (r *randomEpoch) permutation() (*permuter, error) {
	r.permOnce.Do(func() {
		r.perm, r.permErr = newPermuter(r.c.shuffleAlgo, r.rs.unitSizes(), r.c.ncn, r.c.seed, r.c.epoch, r.c.blockSize)
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

// computeRank returns the sample IDs of every worker of a rank, computed in
// one pass (one buffer, split per worker).
func (r *randomEpoch) computeRank(node, rank int) ([][]int64, error) {
	W := r.shape[2]
	per := r.shape[3] * r.shape[4]
	all := make([]int64, 0, W*per)
	for w := range W {
		all = r.pt.AppendWorker(all, node, rank, w)
	}
	if err := r.mapIDs(all); err != nil {
		return nil, err
	}
	out := make([][]int64, W)
	for w := range W {
		out[w] = all[w*per : (w+1)*per : (w+1)*per]
	}
	return out, nil
}

// rankEntry returns the rank's cache entry, computed.
func (r *randomEpoch) rankEntry(node, rank int) (*rankSlices, error) {
	r.mu.Lock()
	e := r.ranks[[2]int{node, rank}]
	if e == nil {
		e = &rankSlices{}
		r.ranks[[2]int{node, rank}] = e
	}
	r.mu.Unlock()
	e.once.Do(func() { e.workers, e.err = r.computeRank(node, rank) })
	return e, e.err
}

// worker hands out a worker's slice: the cached one the first time, a
// freshly computed one after that.
func (r *randomEpoch) worker(node, rank, worker int) ([]int64, error) {
	e, err := r.rankEntry(node, rank)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	ids := e.workers[worker]
	e.workers[worker] = nil
	r.mu.Unlock()
	if ids != nil {
		return ids, nil
	}
	return r.computeWorker(node, rank, worker)
}

// peek returns a worker's slice for reading only, leaving the cached slice
// for Worker to hand out.
func (r *randomEpoch) peek(node, rank, worker int) ([]int64, error) {
	e, err := r.rankEntry(node, rank)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	ids := e.workers[worker]
	r.mu.Unlock()
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
	a := work{shape: s, data: r.pt.AppendAll(make([]int64, 0, s[0]*s[1]*s[2]*per))}
	if err := r.mapIDs(a.data); err != nil {
		return work{}, err
	}
	if len(a.data) != s[0]*s[1]*s[2]*per {
		return work{}, fmt.Errorf("plan: internal error: partition has %d entries, want %d", len(a.data), s[0]*s[1]*s[2]*per)
	}
	return a, nil
}
