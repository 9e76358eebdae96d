package plan

import (
	"slices"
	"sync"
)

// recentSize is how many epochs' shuffles and resamplings a Planner keeps:
// the epochs its ranks and workers are in (a node's agent serves every
// local rank and DataLoader worker, each of which plans its epoch on its
// own).
const recentSize = 4

// recent keeps the last recentSize entries a Planner built, most recent
// last, for its Epochs to share.
type recent[E any] struct {
	mu      sync.Mutex
	entries []E
}

// get returns the entry match accepts, or builds one and keeps it,
// dropping the oldest. Building runs under the lock, so two callers never
// build the same entry.
func (rc *recent[E]) get(match func(E) bool, build func() (E, error)) (E, error) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for i, e := range rc.entries {
		if match(e) {
			rc.entries = append(append(rc.entries[:i:i], rc.entries[i+1:]...), e)
			return e, nil
		}
	}
	e, err := build()
	if err != nil {
		return e, err
	}
	if len(rc.entries) == recentSize {
		rc.entries = slices.Delete(rc.entries, 0, 1)
	}
	rc.entries = append(rc.entries, e)
	return e, nil
}

// permCache shares an epoch's prepared shuffle between the Epochs of one
// Planner that ask for the same one: every rank and worker of a node
// begins the same epoch, and without it each would replay the epoch
// generator through the shuffle's preparation again. A shuffle is a pure
// function of its inputs, which are the key (units compared in full), and
// is safe for concurrent use. Building is cheap (nodes are prepared on
// first use).
type permCache struct {
	recent[permEntry]
}

type permEntry struct {
	algo               string
	ncn                int
	seed, epoch, block int64
	units              []int64
	perm               *permuter
}

func (pc *permCache) get(algo string, units []int64, ncn int, seed, epoch, block int64) (*permuter, error) {
	e, err := pc.recent.get(func(e permEntry) bool {
		return e.algo == algo && e.ncn == ncn && e.seed == seed && e.epoch == epoch && e.block == block &&
			slices.Equal(e.units, units)
	}, func() (permEntry, error) {
		perm, err := newPermuter(algo, units, ncn, seed, epoch, block)
		return permEntry{algo, ncn, seed, epoch, block, units, perm}, err
	})
	return e.perm, err
}
