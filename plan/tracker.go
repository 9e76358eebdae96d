package plan

import "fmt"

// Tracker reproduces a StreamingDataset's epoch counter and resumption
// logic (spec §13.2–§13.4) for one consumer: which epoch the next iteration
// plays, from which sample, with which canonical nodes, seed and initial
// node count, and the state dict to save after some progress.
//
// The epoch counter advances when an iteration begins (Begin), so
// abandoning an epoch and iterating again starts the next one, and State
// before any Begin reports epoch -1, as in MosaicML.
//
// A Tracker is not safe for concurrent use.
type Tracker struct {
	p         *Planner
	nextEpoch int64
	resume    *State
	ncn       int   // 0 until resolved
	seed      int64 // in effect
	blockSize int64 // 0 until resolved
	ipn       int   // from a loaded state; 0 if none
}

// NewTracker returns a Tracker at epoch 0 with the Planner's options.
func (p *Planner) NewTracker() *Tracker {
	return &Tracker{p: p, ncn: p.opts.ncn, seed: p.opts.seed, blockSize: p.opts.blockSize}
}

// Load registers a resume state (MosaicML load_state_dict). It takes effect
// at the next Begin, unless the state is stale (its epoch is before the
// epoch that Begin would play).
func (t *Tracker) Load(s State) error {
	if s.Epoch < -1 || s.SampleInEpoch < 0 || s.ShuffleSeed < 0 || s.NumCanonicalNodes < 0 || s.InitialPhysicalNodes < 0 {
		return fmt.Errorf("%w: %s", ErrBadState, s.AppendJSON(nil))
	}
	t.resume = &s
	return nil
}

// Continue registers a resume state that continues an epoch this Tracker
// may already have begun: a worker that lost its iteration (its agent died,
// a leased shard vanished) begins the same epoch again from the samples it
// had. Unlike Load, such a state is never stale: the epoch counter moves
// back to the state's epoch, and the next Begin plays it.
func (t *Tracker) Continue(s State) error {
	if err := t.Load(s); err != nil {
		return err
	}
	if s.Epoch >= 0 && s.Epoch < t.nextEpoch {
		t.nextEpoch = s.Epoch
	}
	return nil
}

// NextEpoch returns the epoch the next Begin presumes (MosaicML next_epoch).
func (t *Tracker) NextEpoch() int64 { return t.nextEpoch }

// Presume sets the epoch the next Begin presumes. MosaicML keeps one
// next_epoch for all the DataLoader workers of a node in shared memory;
// a server that gives each worker a Tracker of its own calls Presume with
// the epoch the worker's rank is in (or is about to begin), so that a
// worker that played fewer epochs than its peers (it did not exist in an
// iteration with fewer workers, or its process never began one a loop
// broke out of) plays the same epoch they do. A loaded state then
// applies as usual (when its epoch is not before epoch).
func (t *Tracker) Presume(epoch int64) {
	if epoch >= 0 {
		t.nextEpoch = epoch
	}
}

// resolveLazy fills num_canonical_nodes and shuffle_block_size the way
// MosaicML does on first use, for parallel node count nodes.
func (t *Tracker) resolveLazy(nodes int) {
	if t.ncn == 0 {
		t.ncn = DefaultNumCanonicalNodes(t.p.opts.shuffleAlgo, nodes)
	}
	if t.blockSize == 0 {
		t.blockSize = DefaultShuffleBlockSize(t.ncn)
	}
}

// Begin starts the next iteration for the parallel world shape and returns
// the EpochSpec to plan (MosaicML __iter__ → _resume): a loaded state that
// is not stale sets the epoch and sample_in_epoch and overrides
// num_canonical_nodes, shuffle_seed and initial_physical_nodes. The epoch
// counter then moves past the returned epoch.
func (t *Tracker) Begin(shape Shape) (EpochSpec, error) {
	if err := shape.validate(); err != nil {
		return EpochSpec{}, err
	}
	epoch, sample := t.nextEpoch, int64(0)
	if s := t.resume; s != nil && s.Epoch >= epoch {
		epoch, sample = s.Epoch, s.SampleInEpoch
		t.apply(s)
	}
	t.resolveLazy(shape.Nodes)
	t.nextEpoch = epoch + 1
	seed := t.seed
	return EpochSpec{Epoch: epoch, SampleInEpoch: sample, Shape: shape, NumCanonicalNodes: t.ncn,
		ShuffleSeed: &seed, ShuffleBlockSize: t.blockSize, InitialPhysicalNodes: t.ipn}, nil
}

// State returns the state dict to save after this rank has yielded
// samplesYielded samples in the current iteration (MosaicML
// StreamingDataLoader.state_dict): sample_in_epoch = offset +
// samplesYielded × ranks (unreplicated) / replication, where offset is the
// loaded state's sample_in_epoch while its epoch is still in progress.
// Every rank is assumed to have made the same progress.
func (t *Tracker) State(w World, samplesYielded int64) (State, error) {
	pw, err := w.Parallel()
	if err != nil {
		return State{}, err
	}
	if samplesYielded < 0 {
		return State{}, fmt.Errorf("%w: negative sample count %d", ErrInvalid, samplesYielded)
	}
	n := samplesYielded * int64(w.NumRanks())
	if w.Replication > 1 {
		n /= int64(w.Replication)
	}
	epoch, offset := t.nextEpoch-1, int64(0)
	if s := t.resume; s != nil && s.Epoch >= epoch {
		// As MosaicML's state_dict (through _resume), a live loaded state
		// also applies its overrides.
		epoch, offset = s.Epoch, s.SampleInEpoch
		t.apply(s)
	}
	t.resolveLazy(pw.Nodes)
	ipn := t.ipn
	if ipn == 0 {
		ipn = pw.Nodes
	}
	return State{Epoch: epoch, SampleInEpoch: offset + n, NumCanonicalNodes: t.ncn,
		ShuffleSeed: t.seed, InitialPhysicalNodes: ipn}, nil
}

// apply takes the overrides of a live resume state.
func (t *Tracker) apply(s *State) {
	if s.NumCanonicalNodes > 0 {
		t.ncn = s.NumCanonicalNodes
	}
	t.seed = s.ShuffleSeed
	t.ipn = s.InitialPhysicalNodes
}
