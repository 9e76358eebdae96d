package plan

import (
	"slices"
	"sync"
)

// permCacheSize is how many epoch shuffles a Planner keeps: the epochs
// its ranks and workers are in (a node's agent serves every local rank and
// DataLoader worker, each of which plans its epoch on its own).
const permCacheSize = 4

// permCache shares an epoch's prepared shuffle between the Epochs of one
// Planner that ask for the same one: every rank and worker of a node
// begins the same epoch, and without it each would replay the epoch
// generator through the shuffle's preparation again. A shuffle is a pure
// function of its inputs, which are the key (units compared in full), and
// is safe for concurrent use.
type permCache struct {
	mu      sync.Mutex
	entries []permEntry // most recent last
}

type permEntry struct {
	algo               string
	ncn                int
	seed, epoch, block int64
	units              []int64
	perm               *permuter
}

func (pc *permCache) get(algo string, units []int64, ncn int, seed, epoch, block int64) (*permuter, error) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	for i, e := range pc.entries {
		if e.algo == algo && e.ncn == ncn && e.seed == seed && e.epoch == epoch && e.block == block &&
			slices.Equal(e.units, units) {
			pc.entries = append(append(pc.entries[:i:i], pc.entries[i+1:]...), e)
			return e.perm, nil
		}
	}
	// Building is cheap (nodes are prepared on first use), so it runs
	// under the lock and two callers never build the same shuffle.
	perm, err := newPermuter(algo, units, ncn, seed, epoch, block)
	if err != nil {
		return nil, err
	}
	if len(pc.entries) == permCacheSize {
		pc.entries = slices.Delete(pc.entries, 0, 1)
	}
	pc.entries = append(pc.entries, permEntry{algo, ncn, seed, epoch, block, units, perm})
	return perm, nil
}
