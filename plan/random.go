package plan

import (
	"fmt"
	"sync"
)

// randomEpoch plans batching_method random (spec §12.1) per worker: the
// partition gives a worker's canonical positions directly, the shuffle maps
// positions to big IDs, and the resampling maps big IDs to sample IDs.
type randomEpoch struct {
	c     *epochConfig
	rs    *resampled
	ps    partSpec
	shape [5]int

	permOnce sync.Once
	perm     permuter
	permErr  error
}

func (e *Epoch) initRandom() error {
	rs, err := e.p.resample(&e.c, -1)
	if err != nil {
		return err
	}
	ps := partSpec{algo: e.c.partitionAlgo, n: rs.total(), ncn: e.c.ncn, shape: e.c.shape,
		batch: e.c.batchSize, dropFirst: e.c.sampleInEpoch, initialPhysicalNodes: e.c.initialPhysicalNodes}
	shape, err := partitionShape(ps)
	if err != nil {
		return err
	}
	e.rnd = &randomEpoch{c: &e.c, rs: rs, ps: ps, shape: shape}
	return nil
}

// permutation returns the epoch's shuffle, built once.
func (r *randomEpoch) permutation() (permuter, error) {
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

func (r *randomEpoch) worker(node, rank, worker int) ([]int64, error) {
	ids, err := partitionWorker(r.ps, node, rank, worker)
	if err != nil {
		return nil, err
	}
	if err := r.mapIDs(ids); err != nil {
		return nil, err
	}
	return ids, nil
}

// all builds the whole arrangement.
func (r *randomEpoch) all() (work, error) {
	a := work{shape: r.shape}
	s := r.shape
	per := s[3] * s[4]
	a.data = make([]int64, 0, s[0]*s[1]*s[2]*per)
	for p := range s[0] {
		for k := range s[1] {
			for w := range s[2] {
				ids, err := r.worker(p, k, w)
				if err != nil {
					return work{}, err
				}
				if len(ids) != per {
					return work{}, fmt.Errorf("plan: internal error: worker slice has %d entries, want %d", len(ids), per)
				}
				a.data = append(a.data, ids...)
			}
		}
	}
	return a, nil
}
