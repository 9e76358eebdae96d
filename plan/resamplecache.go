package plan

// resampleCache shares an epoch's resampling (resample_streams: each
// shard's repeats and partial picks, a pass over every shard) between the
// Epochs of one Planner that ask for the same one: a node's agent plans
// the epoch once for each of its ranks' workers, which resume together.
// The result is a pure function of the key and is never modified, so it
// is shared as is.
type resampleCache struct {
	recent[resampleEntry]
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
	e, err := p.resamples.get(func(e resampleEntry) bool {
		e.rs = nil
		return e == key
	}, func() (resampleEntry, error) {
		rs, err := p.resampleNew(c, stream)
		e := key
		e.rs = rs
		return e, err
	})
	return e.rs, err
}
