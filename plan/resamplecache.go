package plan

import (
	"slices"
	"sync"
)

// resampleCacheSize is how many epochs' resampling a Planner keeps (as
// permCacheSize: the epochs its ranks and workers are in).
const resampleCacheSize = 4

// resampleCache shares an epoch's resampling (resample_streams: each
// shard's repeats and partial picks, a pass over every shard) between the
// Epochs of one Planner that ask for the same one: a node's agent plans
// the epoch once for each of its ranks' workers, which resume together.
// The result is a pure function of the key and is never modified, so it
// is shared as is.
type resampleCache struct {
	mu      sync.Mutex
	entries []resampleEntry // most recent last
}

// resampleEntry's key is every input of Planner.resampleNew that an
// Epoch can vary (the rest is the Planner's).
type resampleEntry struct {
	seed, epoch      int64
	method           string
	granularity      int64
	epochSeedChanges bool
	stream           int
	rs               *resampled
}

// resample returns resample_streams(epoch, stream) for c (stream < 0:
// all streams), from the cache when an Epoch of this Planner asked for
// it recently.
func (p *Planner) resample(c *epochConfig, stream int) (*resampled, error) {
	key := resampleEntry{seed: c.seed, epoch: c.epoch, method: c.samplingMethod, granularity: c.granularity,
		epochSeedChanges: c.epochSeedChanges, stream: stream}
	rc := p.resamples
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for i, e := range rc.entries {
		if e.withoutResult() == key {
			rc.entries = append(append(rc.entries[:i:i], rc.entries[i+1:]...), e)
			return e.rs, nil
		}
	}
	// Under the lock, as the permutations are built: two Epochs never
	// resample the same epoch twice.
	rs, err := p.resampleNew(c, stream)
	if err != nil {
		return nil, err
	}
	if len(rc.entries) == resampleCacheSize {
		rc.entries = slices.Delete(rc.entries, 0, 1)
	}
	key.rs = rs
	rc.entries = append(rc.entries, key)
	return rs, nil
}

// withoutResult is e's key.
func (e resampleEntry) withoutResult() resampleEntry {
	e.rs = nil
	return e
}
