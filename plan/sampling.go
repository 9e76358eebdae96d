package plan

import (
	"fmt"
	"slices"
	"sort"

	"github.com/sluicedata/sluice/nprand"
)

// maxPicks bounds the number of sampling picks (and so the permutation
// get_sampling draws) to keep memory bounded on absurd inputs.
const maxPicks = 1 << 31

// maxUnits bounds the number of shuffle units (shard repeats) of an epoch.
const maxUnits = 1 << 26

// getSampling decides how many samples each shard of one stream contributes
// to an epoch (upstream get_sampling, spec §11.2).
func getSampling(sizes []int64, choose, granularity, seed, epoch int64, useEpoch bool) ([]int64, error) {
	var n int64
	for _, z := range sizes {
		n += z
	}
	out := make([]int64, len(sizes))
	if n == 0 {
		return out, nil
	}
	if choose%n == 0 {
		for k, z := range sizes {
			out[k] = z * (choose / n)
		}
		return out, nil
	}
	if granularity <= 0 {
		return nil, fmt.Errorf("%w: sampling_granularity %d must be positive", ErrInvalid, granularity)
	}
	// Picks of granularity samples, the last of each shard shorter.
	var numPicks int64
	for _, z := range sizes {
		numPicks += (z + granularity - 1) / granularity
	}
	if numPicks > maxPicks {
		return nil, fmt.Errorf("%w: %d sampling picks is too many; raise sampling_granularity", ErrInvalid, numPicks)
	}
	pickShard := make([]int32, 0, numPicks)
	pickSize := make([]int64, 0, numPicks)
	for k, z := range sizes {
		for rest := z; rest > 0; rest -= granularity {
			pickShard = append(pickShard, int32(k))
			pickSize = append(pickSize, min(rest, granularity))
		}
	}
	s := seed
	if useEpoch {
		s += epoch
	}
	order := nprand.New(uint64(s)).Permutation(int(numPicks))
	for k, z := range sizes {
		out[k] = z * (choose / n)
	}
	rem := choose % n
	for _, i := range order {
		if rem == 0 {
			break
		}
		take := min(rem, pickSize[i])
		out[pickShard[i]] += take
		rem -= take
	}
	return out, nil
}

// unit is one shuffle unit of resample_streams: a full repeat of a shard
// (picks == nil: IDs base … base+size-1) or a partial repeat (IDs base +
// picks[j], picks sorted ascending).
type unit struct {
	base  int64
	size  int64
	picks []int64
}

// resampled is the compact form of resample_streams' (shuffle_units,
// small_per_big): big ID x lies in unit k with start[k] <= x < start[k+1].
type resampled struct {
	units    []unit
	start    []int64 // len(units)+1 exclusive prefix sums
	sizes    []int64 // the units' sizes (shuffle_units), shared read-only
	identity bool    // small_per_big[x] == x for every x
}

func newResampled(units []unit) *resampled {
	r := &resampled{units: units, start: make([]int64, len(units)+1), sizes: make([]int64, len(units)), identity: true}
	for k, u := range units {
		r.start[k+1] = r.start[k] + u.size
		r.sizes[k] = u.size
		if u.picks != nil || u.base != r.start[k] {
			r.identity = false
		}
	}
	return r
}

// total is the epoch size (Σ units).
func (r *resampled) total() int64 { return r.start[len(r.units)] }

// unitSizes returns shuffle_units, shared by every caller (the Epochs
// of a Planner share a resampling, and each looks its shuffle up by
// them): callers must not modify it.
func (r *resampled) unitSizes() []int64 { return r.sizes }

// at returns small_per_big[x] for 0 <= x < total().
func (r *resampled) at(x int64) int64 {
	if r.identity {
		return x
	}
	k := sort.Search(len(r.units), func(k int) bool { return r.start[k+1] > x })
	u := &r.units[k]
	j := x - r.start[k]
	if u.picks != nil {
		return u.base + u.picks[j]
	}
	return u.base + j
}

// resampleNew implements resample_streams(epoch, stream_id) (spec §11.3);
// stream < 0 means all streams.
func (p *Planner) resampleNew(c *epochConfig, stream int) (*resampled, error) {
	s := c.seed
	if c.samplingMethod == SamplingBalanced {
		s += c.epoch
	}
	g := nprand.New(uint64(s))
	// Every stream's sampling first, to size the units at once (one
	// allocation for 40k shards, not a slice grown and copied).
	all := make([][]int64, len(p.streams))
	var count int64
	for si, st := range p.streams {
		if stream >= 0 && si != stream {
			continue
		}
		chooses, err := getSampling(st.shardSizes, st.choose, c.granularity, c.seed, c.epoch, c.epochSeedChanges)
		if err != nil {
			return nil, fmt.Errorf("stream %d: %w", si, err)
		}
		all[si] = chooses
		for k, n := range st.shardSizes {
			if n > 0 {
				count += chooses[k] / n
				if chooses[k]%n != 0 {
					count++
				}
			}
		}
	}
	if count > maxUnits {
		count = 0 // too many: the loop below says so
	}
	units := make([]unit, 0, count)
	for si, st := range p.streams {
		if stream >= 0 && si != stream {
			continue
		}
		chooses := all[si]
		base := st.sampleBase
		for k, n := range st.shardSizes {
			if n > 0 {
				ck := chooses[k]
				if int64(len(units))+ck/n > maxUnits {
					return nil, fmt.Errorf("%w: stream %d: more than %d shuffle units (shard repeats); use fewer repeats or bigger shards", ErrInvalid, si, maxUnits)
				}
				for range ck / n {
					units = append(units, unit{base: base, size: n})
				}
				if rem := ck % n; rem != 0 {
					picks, err := g.Choice(int(n), int(rem))
					if err != nil {
						return nil, fmt.Errorf("stream %d: shard %d: %w", si, k, err)
					}
					slices.Sort(picks)
					units = append(units, unit{base: base, size: rem, picks: picks})
				}
			}
			base += n
		}
	}
	return newResampled(units), nil
}
