package plan

import (
	"fmt"
	"slices"
	"sync"

	"github.com/sluicedata/sluice/nprand"
)

// Planner computes epoch plans for a fixed list of streams and options. It
// holds only the streams' shard sizes and the resolved weights; every epoch
// is computed on demand by Epoch. A Planner is immutable and safe for
// concurrent use.
type Planner struct {
	opts      resolved
	streams   []streamInfo
	layout    layout
	epochSize int64
	perms     *permCache     // epoch shuffles shared by this Planner's Epochs
	resamples *resampleCache // epoch resamplings shared by this Planner's Epochs
}

// New validates the streams and options and resolves the stream weights
// (spec §11.1). The shortfall of relative weights is distributed with the
// constructor's shuffle seed, as MosaicML does at construction.
func New(streams []Stream, opts *Options) (*Planner, error) {
	o, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	infos, err := resolveStreams(streams, o.epochSize, o.seed)
	if err != nil {
		return nil, err
	}
	p := &Planner{opts: o, streams: infos, layout: newLayout(infos), perms: &permCache{}, resamples: &resampleCache{}}
	for _, s := range infos {
		p.epochSize += s.choose
	}
	return p, nil
}

// NumSamples returns the underlying sample count of all streams together
// (MosaicML num_samples, the range of Locate).
func (p *Planner) NumSamples() int64 { return p.layout.shardStart[len(p.layout.shardSizes)] }

// EpochSize returns the number of samples per epoch (Σ choose_s).
func (p *Planner) EpochSize() int64 { return p.epochSize }

// Len returns MosaicML's len(dataset) for numRanks (parallel) ranks:
// ceil(epoch_size / numRanks).
func (p *Planner) Len(numRanks int) int64 {
	if numRanks <= 0 {
		numRanks = 1
	}
	return (p.epochSize + int64(numRanks) - 1) / int64(numRanks)
}

// NumShards returns the number of shards of all streams together.
func (p *Planner) NumShards() int { return len(p.layout.shardSizes) }

// ShardSizes returns a copy of every shard's sample count, streams
// concatenated: global shard IDs index it.
func (p *Planner) ShardSizes() []int64 { return slices.Clone(p.layout.shardSizes) }

// ShardStream returns the stream of a global shard ID.
func (p *Planner) ShardStream(shard int) int { return int(p.layout.shardStream[shard]) }

// Locate maps a global sample ID to its global shard ID and its index within
// that shard. It fails for IDs outside [0, NumSamples()).
func (p *Planner) Locate(sample int64) (shard int, index int64, err error) {
	k, j, ok := p.layout.locate(sample)
	if !ok {
		return 0, 0, fmt.Errorf("%w: sample %d out of range [0, %d)", ErrInvalid, sample, p.NumSamples())
	}
	return k, j, nil
}

// StreamWeight is a stream's resolved weight for one epoch.
type StreamWeight struct {
	// Samples is the stream's underlying sample count.
	Samples int64
	// Choose is the number of samples it contributes per epoch.
	Choose int64
	// Proportion is Choose / EpochSize (or the normalised given proportion).
	Proportion float64
	// Repeat is Choose / Samples.
	Repeat float64
	// FirstShard and FirstSample are the stream's global offsets.
	FirstShard  int
	FirstSample int64
}

// Streams returns the resolved weights of every stream.
func (p *Planner) Streams() []StreamWeight {
	out := make([]StreamWeight, len(p.streams))
	for i, s := range p.streams {
		out[i] = StreamWeight{Samples: s.samples, Choose: s.choose, Proportion: s.proportion,
			Repeat: s.repeat, FirstShard: s.shardOffset, FirstSample: s.sampleBase}
	}
	return out
}

// EpochSpec says which epoch to plan, for which (parallel) world shape, from
// which position. Zero fields take the Planner's options or MosaicML's lazy
// defaults; Tracker.Begin fills every field exactly as MosaicML's resume
// logic does.
type EpochSpec struct {
	// Epoch is the epoch number (≥ 0).
	Epoch int64
	// SampleInEpoch is the number of samples of this epoch already consumed
	// over all ranks (resumption); 0 plans the whole epoch.
	SampleInEpoch int64
	// Shape is the parallel world (after replication).
	Shape Shape
	// NumCanonicalNodes overrides the option (0: Options.NumCanonicalNodes,
	// else 64·P for py1s/py2s and P otherwise).
	NumCanonicalNodes int
	// ShuffleSeed overrides the option (nil: Options.ShuffleSeed).
	ShuffleSeed *int64
	// ShuffleBlockSize overrides the option (0: Options.ShuffleBlockSize,
	// else max(4_000_000/NCN, 1<<18)).
	ShuffleBlockSize int64
	// InitialPhysicalNodes is the node count of the run's first epoch, from a
	// resume state (0: none, i.e. this is the first run).
	InitialPhysicalNodes int
}

// epochConfig is a fully resolved EpochSpec plus options.
type epochConfig struct {
	resolved
	epoch                int64
	sampleInEpoch        int64
	shape                Shape
	initialPhysicalNodes int
}

// batchRNG is the generator per_stream and device_per_stream use to order
// their batches.
func (c *epochConfig) batchRNG() *nprand.Generator {
	if c.epochSeedChanges {
		return nprand.New(uint64(c.seed + c.epoch))
	}
	return nprand.New(uint64(c.seed))
}

func (p *Planner) config(spec EpochSpec) (epochConfig, error) {
	c := epochConfig{resolved: p.opts, epoch: spec.Epoch, sampleInEpoch: spec.SampleInEpoch,
		shape: spec.Shape, initialPhysicalNodes: spec.InitialPhysicalNodes}
	if err := spec.Shape.validate(); err != nil {
		return c, err
	}
	if spec.Epoch < 0 || spec.Epoch > maxSamples {
		return c, fmt.Errorf("%w: epoch %d out of range", ErrInvalid, spec.Epoch)
	}
	if spec.SampleInEpoch < 0 {
		return c, fmt.Errorf("%w: sample_in_epoch %d must be non-negative", ErrInvalid, spec.SampleInEpoch)
	}
	if spec.InitialPhysicalNodes < 0 {
		return c, fmt.Errorf("%w: initial_physical_nodes %d must be positive", ErrInvalid, spec.InitialPhysicalNodes)
	}
	if c.batchSize <= 0 {
		return c, fmt.Errorf("%w: batch_size must be set to plan an epoch", ErrInvalid)
	}
	if spec.NumCanonicalNodes < 0 || spec.ShuffleBlockSize < 0 {
		return c, fmt.Errorf("%w: num_canonical_nodes %d and shuffle_block_size %d must be positive", ErrInvalid, spec.NumCanonicalNodes, spec.ShuffleBlockSize)
	}
	if spec.NumCanonicalNodes > 0 {
		c.ncn = spec.NumCanonicalNodes
	}
	if c.ncn == 0 {
		c.ncn = DefaultNumCanonicalNodes(c.shuffleAlgo, spec.Shape.Nodes)
	}
	if spec.ShuffleSeed != nil {
		if *spec.ShuffleSeed < 0 {
			return c, fmt.Errorf("%w: shuffle_seed %d must be non-negative", ErrInvalid, *spec.ShuffleSeed)
		}
		c.seed = *spec.ShuffleSeed
	}
	if spec.ShuffleBlockSize > 0 {
		c.blockSize = spec.ShuffleBlockSize
	}
	if c.blockSize == 0 {
		c.blockSize = DefaultShuffleBlockSize(c.ncn)
	}
	if c.seed+c.epoch < 0 {
		return c, fmt.Errorf("%w: shuffle_seed %d + epoch %d overflows", ErrInvalid, c.seed, c.epoch)
	}
	return c, nil
}

// Epoch plans one epoch. For random batching the returned Epoch computes
// each rank's samples on demand, and what every rank shares (the epoch's
// resampling and the shuffle's preparation) once, on first use. The other
// batching methods are global and build their arrangement here.
func (p *Planner) Epoch(spec EpochSpec) (*Epoch, error) {
	c, err := p.config(spec)
	if err != nil {
		return nil, err
	}
	e := &Epoch{p: p, c: c}
	if c.batchingMethod == BatchingRandom {
		if err := e.initRandom(); err != nil {
			return nil, err
		}
		return e, nil
	}
	// The other methods are global: build the arrangement now, so that an
	// impossible configuration fails here.
	if _, err := e.materialise(); err != nil {
		return nil, err
	}
	return e, nil
}

// Epoch is one planned epoch for one parallel world shape and resume
// position: MosaicML's generate_work, computed per worker on demand. An
// Epoch is safe for concurrent use.
type Epoch struct {
	p *Planner
	c epochConfig

	// random batching
	rnd *randomEpoch

	// other batching methods: the whole arrangement, built once.
	fullOnce sync.Once
	full     work
	fullErr  error
}

// Spec returns the epoch's fully resolved spec (canonical nodes, seed,
// block size filled in).
func (e *Epoch) Spec() EpochSpec {
	seed := e.c.seed
	return EpochSpec{Epoch: e.c.epoch, SampleInEpoch: e.c.sampleInEpoch, Shape: e.c.shape,
		NumCanonicalNodes: e.c.ncn, ShuffleSeed: &seed, ShuffleBlockSize: e.c.blockSize,
		InitialPhysicalNodes: e.c.initialPhysicalNodes}
}

// BatchSize returns the per-device batch size.
func (e *Epoch) BatchSize() int { return e.c.batchSize }

func (e *Epoch) materialise() (*work, error) {
	e.fullOnce.Do(func() {
		switch e.c.batchingMethod {
		case BatchingRandom:
			e.full, e.fullErr = e.rnd.all()
		case BatchingPerStream:
			e.full, e.fullErr = e.p.perStreamWork(&e.c)
		case BatchingStratified:
			e.full, e.fullErr = e.p.stratifiedWork(&e.c)
		case BatchingDevicePerStream:
			e.full, e.fullErr = e.p.devicePerStreamWork(&e.c)
		default:
			e.fullErr = fmt.Errorf("%w: unknown batching_method %q", ErrInvalid, e.c.batchingMethod)
		}
	})
	return &e.full, e.fullErr
}

// WorkShape returns generate_work's shape: (nodes, ranks per node, workers
// per rank, batches per worker, batch size).
func (e *Epoch) WorkShape() ([5]int, error) {
	if e.rnd != nil {
		return e.rnd.shape, nil
	}
	a, err := e.materialise()
	if err != nil {
		return [5]int{}, err
	}
	return a.shape, nil
}

func (e *Epoch) checkWorker(node, rank, worker int) error {
	s := e.c.shape
	if node < 0 || node >= s.Nodes || rank < 0 || rank >= s.RanksPerNode || worker < 0 || worker >= s.WorkersPerRank {
		return fmt.Errorf("%w: worker (node %d, rank %d, worker %d) outside shape %d×%d×%d",
			ErrInvalid, node, rank, worker, s.Nodes, s.RanksPerNode, s.WorkersPerRank)
	}
	return nil
}

// Worker returns the sample IDs of one worker (node, rank of node, worker of
// rank) in the order it yields them: generate_work()[node][rank][worker]
// flattened, batch after batch, with -1 as padding (which the consumer
// skips). The slice belongs to the caller.
//
// For random batching the first call for a rank computes all of that rank's
// workers in one pass and keeps the others' slices until they are asked
// for; it costs time proportional to the canonical-node ranges the rank
// draws from (its node's share), memory proportional to the rank's share,
// plus the epoch's shuffle preparation, done once per Epoch and shared.
// Other batching methods build the whole arrangement once per Epoch.
func (e *Epoch) Worker(node, rank, worker int) ([]int64, error) {
	if err := e.checkWorker(node, rank, worker); err != nil {
		return nil, err
	}
	if e.rnd != nil {
		return e.rnd.worker(node, rank, worker)
	}
	a, err := e.materialise()
	if err != nil {
		return nil, err
	}
	base := a.index(node, rank, worker, 0, 0)
	return slices.Clone(a.data[base : base+a.shape[3]*a.shape[4]]), nil
}

// workerRO returns a worker's slice for reading only (it may be shared
// with the cache or the materialised arrangement).
func (e *Epoch) workerRO(node, rank, worker int) ([]int64, error) {
	if err := e.checkWorker(node, rank, worker); err != nil {
		return nil, err
	}
	if e.rnd != nil {
		return e.rnd.peek(node, rank, worker)
	}
	a, err := e.materialise()
	if err != nil {
		return nil, err
	}
	base := a.index(node, rank, worker, 0, 0)
	return a.data[base : base+a.shape[3]*a.shape[4]], nil
}

// Work returns MosaicML's generate_work output: the whole arrangement
// flattened in C order with its shape. It materialises the epoch; consumers
// should use Worker.
func (e *Epoch) Work() (shape [5]int, data []int64, err error) {
	a, err := e.materialise()
	if err != nil {
		return shape, nil, err
	}
	return a.shape, slices.Clone(a.data), nil
}

// RankBatches returns the batches an in-order PyTorch DataLoader yields on
// one rank: each worker's samples with -1 dropped, cut into batches of
// batch_size (the last may be short), taken round-robin over the workers
// (an exhausted worker is skipped).
func (e *Epoch) RankBatches(node, rank int) ([][]int64, error) {
	W := e.c.shape.WorkersPerRank
	per := make([][][]int64, W)
	for w := range W {
		ids, err := e.workerRO(node, rank, w)
		if err != nil {
			return nil, err
		}
		per[w] = cutBatches(ids, e.c.batchSize)
	}
	var out [][]int64
	for b := 0; ; b++ {
		more := false
		for w := range W {
			if b < len(per[w]) {
				out = append(out, per[w][b])
				more = true
			}
		}
		if !more {
			return out, nil
		}
	}
}

// cutBatches drops -1 entries and cuts ids into batches of size b.
func cutBatches(ids []int64, b int) [][]int64 {
	var out [][]int64
	cur := make([]int64, 0, b)
	for _, x := range ids {
		if x < 0 {
			continue
		}
		cur = append(cur, x)
		if len(cur) == b {
			out = append(out, cur)
			cur = make([]int64, 0, b)
		}
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// NodeOrder returns the sample IDs one node consumes this epoch, in
// consumption order: step by step (batch t of every rank is worker t%W's
// batch t/W), ranks in order within a step, -1 padding dropped. It is the
// order in which the node's cache will need shards. For random batching it
// computes every rank of the node in one pass and keeps their worker slices
// for Worker.
func (e *Epoch) NodeOrder(node int) ([]int64, error) {
	order, _, err := e.nodeOrder(node)
	return order, err
}

// nodeOrder returns NodeOrder and the position where each step starts.
func (e *Epoch) nodeOrder(node int) (order, stepStart []int64, err error) {
	s := e.c.shape
	if node < 0 || node >= s.Nodes {
		return nil, nil, fmt.Errorf("%w: node %d outside %d nodes", ErrInvalid, node, s.Nodes)
	}
	B := e.c.batchSize
	R, W := s.RanksPerNode, s.WorkersPerRank
	if e.rnd != nil {
		if err := e.rnd.computeNode(node); err != nil {
			return nil, nil, err
		}
	}
	ws := make([][]int64, R*W)
	total := 0
	for r := range R {
		for w := range W {
			ids, err := e.workerRO(node, r, w)
			if err != nil {
				return nil, nil, err
			}
			ws[r*W+w] = ids
			total += len(ids)
		}
	}
	order = make([]int64, 0, total)
	nb := len(ws[0]) / B
	for b := range nb {
		for w := range W {
			stepStart = append(stepStart, int64(len(order)))
			for r := range R {
				for _, x := range ws[r*W+w][b*B : (b+1)*B] {
					if x >= 0 {
						order = append(order, x)
					}
				}
			}
		}
	}
	return order, stepStart, nil
}
