package plan

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ErrInvalid marks every error caused by an invalid option, stream or world.
// Check it with errors.Is.
var ErrInvalid = errors.New("plan: invalid argument")

// Shuffle algorithm names, as MosaicML spells them (spec §10).
const (
	AlgoNaive = "naive"
	AlgoPy1s  = "py1s"
	AlgoPy2s  = "py2s"
	AlgoPy1br = "py1br"
	AlgoPy1e  = "py1e"
	// AlgoPy1b is the block shuffle MosaicML removed in v0.11. It is accepted
	// so that old configs keep working; current MosaicML rejects it.
	AlgoPy1b = "py1b"
)

// Partition algorithm names (spec §9).
const (
	PartitionOrig    = "orig"
	PartitionRelaxed = "relaxed"
)

// Sampling method names (spec §11.2–§11.3).
const (
	SamplingBalanced = "balanced"
	SamplingFixed    = "fixed"
)

// Batching method names (spec §12).
const (
	BatchingRandom          = "random"
	BatchingStratified      = "stratified"
	BatchingPerStream       = "per_stream"
	BatchingDevicePerStream = "device_per_stream"
)

// DefaultShuffleSeed is MosaicML's default shuffle_seed.
const DefaultShuffleSeed = 9176

// Options are the order-related arguments of MosaicML's StreamingDataset,
// under the same names and with the same defaults (spec §15.1). A nil
// *Options means all defaults. Zero values mean "use the default" except where
// a field says otherwise.
type Options struct {
	// Shuffle enables shuffling (MosaicML shuffle; default false).
	Shuffle bool
	// ShuffleAlgo is one of naive, py1s, py2s, py1br, py1e or py1b
	// (shuffle_algo; "" means py1e).
	ShuffleAlgo string
	// ShuffleSeed is the only source of randomness (shuffle_seed; nil means
	// 9176). It must be ≥ 0.
	ShuffleSeed *int64
	// ShuffleBlockSize is used by py1br, py1e and py1b (shuffle_block_size;
	// 0 means max(4_000_000/NCN, 1<<18), resolved lazily).
	ShuffleBlockSize int64
	// NumCanonicalNodes fixes the global order (num_canonical_nodes; 0 means
	// resolved lazily at the first epoch: 64·P for py1s/py2s, P otherwise).
	NumCanonicalNodes int
	// BatchSize is the per-device batch size (batch_size). It must be set
	// (> 0) before an epoch is planned.
	BatchSize int
	// PartitionAlgo is orig or relaxed (partition_algo; "" means relaxed).
	PartitionAlgo string
	// SamplingMethod is balanced or fixed (sampling_method; "" means balanced).
	SamplingMethod string
	// SamplingGranularity is the pick size for partial repeats
	// (sampling_granularity; 0 means 1).
	SamplingGranularity int64
	// BatchingMethod is random, stratified, per_stream or device_per_stream
	// (batching_method; "" means random).
	BatchingMethod string
	// EpochSize is the number of samples per epoch (epoch_size; 0 means the
	// sum of the streams' choose counts). Only valid with relative or no
	// stream weights. ParseEpochSize reads MosaicML's "100k" strings.
	EpochSize int64
}

// resolved is a validated, filled-in copy of Options (except the lazy
// NumCanonicalNodes and ShuffleBlockSize).
type resolved struct {
	shuffle          bool
	shuffleAlgo      string
	seed             int64
	blockSize        int64 // 0: lazy
	ncn              int   // 0: lazy
	batchSize        int
	partitionAlgo    string
	samplingMethod   string
	granularity      int64
	batchingMethod   string
	epochSize        int64 // 0: unset
	epochSeedChanges bool  // shuffle && balanced (upstream epoch_seed_change)
}

func (o *Options) resolve() (resolved, error) {
	var opt Options
	if o != nil {
		opt = *o
	}
	r := resolved{
		shuffle:        opt.Shuffle,
		shuffleAlgo:    opt.ShuffleAlgo,
		seed:           DefaultShuffleSeed,
		blockSize:      opt.ShuffleBlockSize,
		ncn:            opt.NumCanonicalNodes,
		batchSize:      opt.BatchSize,
		partitionAlgo:  opt.PartitionAlgo,
		samplingMethod: opt.SamplingMethod,
		granularity:    opt.SamplingGranularity,
		batchingMethod: opt.BatchingMethod,
		epochSize:      opt.EpochSize,
	}
	if opt.ShuffleSeed != nil {
		r.seed = *opt.ShuffleSeed
	}
	if r.shuffleAlgo == "" {
		r.shuffleAlgo = AlgoPy1e
	}
	if r.partitionAlgo == "" {
		r.partitionAlgo = PartitionRelaxed
	}
	if r.samplingMethod == "" {
		r.samplingMethod = SamplingBalanced
	}
	if r.granularity == 0 {
		r.granularity = 1
	}
	if r.batchingMethod == "" {
		r.batchingMethod = BatchingRandom
	}
	switch r.shuffleAlgo {
	case AlgoNaive, AlgoPy1s, AlgoPy2s, AlgoPy1br, AlgoPy1e, AlgoPy1b:
	default:
		return r, fmt.Errorf("%w: unknown shuffle_algo %q (want naive, py1s, py2s, py1br, py1e or py1b)", ErrInvalid, r.shuffleAlgo)
	}
	switch r.partitionAlgo {
	case PartitionOrig, PartitionRelaxed:
	default:
		return r, fmt.Errorf("%w: unknown partition_algo %q (want orig or relaxed)", ErrInvalid, r.partitionAlgo)
	}
	switch r.samplingMethod {
	case SamplingBalanced, SamplingFixed:
	default:
		return r, fmt.Errorf("%w: unknown sampling_method %q (want balanced or fixed)", ErrInvalid, r.samplingMethod)
	}
	switch r.batchingMethod {
	case BatchingRandom, BatchingStratified, BatchingPerStream, BatchingDevicePerStream:
	default:
		return r, fmt.Errorf("%w: unknown batching_method %q (want random, stratified, per_stream or device_per_stream)", ErrInvalid, r.batchingMethod)
	}
	if r.seed < 0 {
		return r, fmt.Errorf("%w: shuffle_seed %d must be non-negative", ErrInvalid, r.seed)
	}
	if r.blockSize < 0 {
		return r, fmt.Errorf("%w: shuffle_block_size %d must be positive", ErrInvalid, r.blockSize)
	}
	if r.ncn < 0 {
		return r, fmt.Errorf("%w: num_canonical_nodes %d must be positive", ErrInvalid, r.ncn)
	}
	if r.batchSize < 0 {
		return r, fmt.Errorf("%w: batch_size %d must be positive", ErrInvalid, r.batchSize)
	}
	if r.granularity < 0 {
		return r, fmt.Errorf("%w: sampling_granularity %d must be positive", ErrInvalid, r.granularity)
	}
	if r.epochSize < 0 {
		return r, fmt.Errorf("%w: epoch_size %d must be non-negative", ErrInvalid, r.epochSize)
	}
	r.epochSeedChanges = r.shuffle && r.samplingMethod == SamplingBalanced
	return r, nil
}

// DefaultNumCanonicalNodes returns the num_canonical_nodes MosaicML picks
// when none is given, for the parallel world's node count nodes (spec §13.3).
func DefaultNumCanonicalNodes(shuffleAlgo string, nodes int) int {
	if shuffleAlgo == AlgoPy1s || shuffleAlgo == AlgoPy2s {
		return 64 * nodes
	}
	return nodes
}

// DefaultShuffleBlockSize returns the shuffle_block_size MosaicML picks when
// none is given: max(4_000_000 // ncn, 1<<18) (spec §13.3).
func DefaultShuffleBlockSize(ncn int) int64 {
	if ncn <= 0 {
		ncn = 1
	}
	return max(4_000_000/int64(ncn), 1<<18)
}

// ParseEpochSize parses MosaicML's epoch_size: an integer, or a number with a
// suffix k (10³), m (10⁶), b (10⁹) or t (10¹²), fractions allowed ("1.5m").
// The result is truncated toward zero. It must be non-negative.
func ParseEpochSize(s string) (int64, error) {
	v, err := parseSuffixed(s, map[byte]float64{'k': 1e3, 'm': 1e6, 'b': 1e9, 't': 1e12})
	if err != nil {
		return 0, fmt.Errorf("%w: epoch_size %q: %v", ErrInvalid, s, err)
	}
	return v, nil
}

// parseSuffixed parses "<number>[suffix]" where suffix is one byte of mult.
func parseSuffixed(s string, mult map[byte]float64) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	if t == "" {
		return 0, errors.New("empty")
	}
	m := 1.0
	if f, ok := mult[t[len(t)-1]]; ok {
		m = f
		t = t[:len(t)-1]
	}
	if n, err := strconv.ParseInt(t, 10, 64); err == nil && m == 1 {
		if n < 0 {
			return 0, errors.New("negative")
		}
		return n, nil
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, errors.New("not a number")
	}
	v := f * m
	if v < 0 {
		return 0, errors.New("negative")
	}
	if v >= math.MaxInt64 {
		return 0, errors.New("too large")
	}
	return int64(v), nil
}
