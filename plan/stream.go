package plan

import (
	"fmt"
	"math"
	"sort"

	"github.com/sluicedata/sluice/nprand"
)

// Stream is one source of samples (MosaicML's Stream, spec §2.9, §11.1):
// its shard sizes in index order and at most one weight. Streams are
// concatenated in the order given; global shard and sample IDs follow that
// order.
type Stream struct {
	// ShardSizes holds the number of samples in each shard, in index order.
	// Shards with 0 samples are allowed; a stream with 0 samples in total is
	// an error.
	ShardSizes []int64
	// Proportion is the relative weight (proportion; nil means unset). If
	// one stream sets it, all must.
	Proportion *float64
	// Repeat multiplies the stream's sample count (repeat; nil means unset).
	Repeat *float64
	// Choose is the absolute number of samples per epoch (choose; nil means
	// unset).
	Choose *int64
}

// streamInfo is a stream after weights were resolved.
type streamInfo struct {
	shardSizes  []int64
	shardOffset int   // first global shard ID
	sampleBase  int64 // first global sample ID
	samples     int64 // underlying sample count n_s
	choose      int64 // samples per epoch choose_s
	proportion  float64
	repeat      float64
}

// maxSamples bounds the total sample count so that every index fits int64
// arithmetic comfortably (and rejects absurd inputs before allocating).
const maxSamples = 1 << 48

// maxMaterialised bounds the entries of any array this package allocates
// (a worker's slice, a whole arrangement, a stream's partition): 2^31
// int64 values, 16 GiB. Larger requests fail with ErrInvalid instead of
// exhausting memory.
const maxMaterialised = 1 << 31

// resolveStreams validates the streams and computes choose_s, proportion_s
// and repeat_s (spec §11.1). epochSize 0 means unset.
func resolveStreams(streams []Stream, epochSize, seed int64) ([]streamInfo, error) {
	if len(streams) == 0 {
		return nil, fmt.Errorf("%w: no streams", ErrInvalid)
	}
	infos := make([]streamInfo, len(streams))
	var totalSamples int64
	shardOffset := 0
	relative := 0
	for i, s := range streams {
		set := 0
		if s.Proportion != nil {
			set++
			relative++
			if !(*s.Proportion >= 0) || math.IsInf(*s.Proportion, 0) {
				return nil, fmt.Errorf("%w: stream %d: proportion %v must be a non-negative number", ErrInvalid, i, *s.Proportion)
			}
		}
		if s.Repeat != nil {
			set++
			if !(*s.Repeat >= 0) || math.IsInf(*s.Repeat, 0) {
				return nil, fmt.Errorf("%w: stream %d: repeat %v must be a non-negative number", ErrInvalid, i, *s.Repeat)
			}
		}
		if s.Choose != nil {
			set++
			if *s.Choose < 0 || *s.Choose > maxSamples {
				return nil, fmt.Errorf("%w: stream %d: choose %d out of range", ErrInvalid, i, *s.Choose)
			}
		}
		if set > 1 {
			return nil, fmt.Errorf("%w: stream %d: set at most one of proportion, repeat and choose", ErrInvalid, i)
		}
		var n int64
		for k, z := range s.ShardSizes {
			if z < 0 || z > maxSamples {
				return nil, fmt.Errorf("%w: stream %d: shard %d: sample count %d out of range", ErrInvalid, i, k, z)
			}
			n += z
			if n > maxSamples {
				return nil, fmt.Errorf("%w: stream %d: too many samples", ErrInvalid, i)
			}
		}
		if n == 0 {
			return nil, fmt.Errorf("%w: stream %d has no samples", ErrInvalid, i)
		}
		infos[i] = streamInfo{
			shardSizes:  s.ShardSizes,
			shardOffset: shardOffset,
			sampleBase:  totalSamples,
			samples:     n,
		}
		shardOffset += len(s.ShardSizes)
		totalSamples += n
		if totalSamples > maxSamples {
			return nil, fmt.Errorf("%w: too many samples", ErrInvalid)
		}
	}
	if relative != 0 && relative != len(streams) {
		return nil, fmt.Errorf("%w: either all streams set proportion or none does", ErrInvalid)
	}
	if epochSize > maxSamples {
		return nil, fmt.Errorf("%w: epoch_size %d too large", ErrInvalid, epochSize)
	}

	if relative > 0 || epochSize > 0 {
		// Relative weights (spec §11.1): normalise, truncate, hand out the
		// shortfall to distinct streams picked by default_rng(seed).choice.
		props := make([]float64, len(streams))
		var sum float64
		for i, s := range streams {
			if s.Repeat != nil || s.Choose != nil {
				return nil, fmt.Errorf("%w: stream %d: only provide choose or repeat when weighting streams absolutely (epoch_size is set)", ErrInvalid, i)
			}
			if s.Proportion != nil {
				props[i] = *s.Proportion
			} else {
				props[i] = float64(infos[i].samples)
			}
			sum += props[i]
		}
		if !(sum > 0) {
			return nil, fmt.Errorf("%w: stream proportions sum to zero", ErrInvalid)
		}
		total := epochSize
		if total == 0 {
			total = totalSamples
		}
		var chosen int64
		for i := range props {
			props[i] /= sum
			infos[i].choose = int64(float64(total) * props[i])
			chosen += infos[i].choose
		}
		if short := total - chosen; short > 0 {
			if short > int64(len(streams)) {
				return nil, fmt.Errorf("%w: cannot distribute %d missing samples over %d streams", ErrInvalid, short, len(streams))
			}
			picks, err := nprand.New(uint64(seed)).Choice(len(streams), int(short))
			if err != nil {
				return nil, fmt.Errorf("%w: distributing epoch_size over streams: %v", ErrInvalid, err)
			}
			for _, s := range picks {
				infos[s].choose++
			}
		}
		for i := range infos {
			infos[i].proportion = props[i]
		}
	} else {
		var sum int64
		for i, s := range streams {
			c := infos[i].samples
			switch {
			case s.Repeat != nil:
				f := *s.Repeat * float64(c)
				if f > maxSamples {
					return nil, fmt.Errorf("%w: stream %d: repeat %v too large", ErrInvalid, i, *s.Repeat)
				}
				c = int64(f)
			case s.Choose != nil:
				c = *s.Choose
			}
			infos[i].choose = c
			sum += c
		}
		if sum == 0 {
			return nil, fmt.Errorf("%w: streams choose 0 samples per epoch", ErrInvalid)
		}
		if sum > maxSamples {
			return nil, fmt.Errorf("%w: too many samples per epoch", ErrInvalid)
		}
		for i := range infos {
			infos[i].proportion = float64(infos[i].choose) / float64(sum)
		}
	}
	for i := range infos {
		infos[i].repeat = float64(infos[i].choose) / float64(infos[i].samples)
	}
	return infos, nil
}

// layout maps global sample IDs to shards.
type layout struct {
	shardSizes  []int64 // all streams' shards, concatenated
	shardStart  []int64 // exclusive prefix sums of shardSizes (len+1)
	shardStream []int32 // stream of each shard
}

func newLayout(infos []streamInfo) layout {
	shards := 0
	for _, s := range infos {
		shards += len(s.shardSizes)
	}
	l := layout{
		shardSizes:  make([]int64, 0, shards),
		shardStream: make([]int32, 0, shards),
	}
	for si, s := range infos {
		for _, z := range s.shardSizes {
			l.shardSizes = append(l.shardSizes, z)
			l.shardStream = append(l.shardStream, int32(si))
		}
	}
	l.shardStart = make([]int64, len(l.shardSizes)+1)
	for k, z := range l.shardSizes {
		l.shardStart[k+1] = l.shardStart[k] + z
	}
	return l
}

// locate returns the shard holding global sample id and its index in it.
// ok is false when id is out of range.
func (l *layout) locate(id int64) (shard int, index int64, ok bool) {
	if id < 0 || id >= l.shardStart[len(l.shardStart)-1] {
		return 0, 0, false
	}
	// Largest k with shardStart[k] <= id; 0-sample shards are skipped
	// naturally because their start equals the next one's.
	k := sort.Search(len(l.shardSizes), func(k int) bool { return l.shardStart[k+1] > id })
	return k, id - l.shardStart[k], true
}
