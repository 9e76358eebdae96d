package plan

import (
	"slices"
	"testing"
)

// TestResampleCacheKeys: one Planner asked for epochs and shuffle seeds
// in an interleaved order (more keys than its caches hold, then back to
// the first) gives every Epoch the workers' samples a fresh Planner
// gives: with streams whose resampling (partial repeats of shards)
// depends on the seed and the epoch, and with whole streams, whose
// shuffle units are the same every epoch (so only the key tells the
// shuffles apart). Two Epochs of one key share one resampling.
func TestResampleCacheKeys(t *testing.T) {
	for _, streams := range [][]Stream{
		{{ShardSizes: []int64{6, 6, 6, 5}, Proportion: ptr(0.7)}, {ShardSizes: []int64{7, 5, 9}, Proportion: ptr(0.3)}},
		{{ShardSizes: []int64{6, 6, 6, 5}}, {ShardSizes: []int64{7, 5, 9}}},
	} {
		testRecentKeys(t, streams)
	}
}

func testRecentKeys(t *testing.T, streams []Stream) {
	o := &Options{BatchSize: 2, Shuffle: true, ShuffleAlgo: AlgoPy1e, ShuffleSeed: ptr(int64(3))}
	shape := Shape{Nodes: 1, RanksPerNode: 2, WorkersPerRank: 2}
	shared, err := New(streams, o)
	if err != nil {
		t.Fatal(err)
	}
	samples := func(p *Planner, spec EpochSpec) []int64 {
		t.Helper()
		e, err := p.Epoch(spec)
		if err != nil {
			t.Fatal(err)
		}
		var all []int64
		for r := range shape.RanksPerNode {
			for w := range shape.WorkersPerRank {
				ids, err := e.Worker(0, r, w)
				if err != nil {
					t.Fatal(err)
				}
				all = append(all, ids...)
			}
		}
		return all
	}
	var specs []EpochSpec
	for _, seed := range []int64{3, 4} {
		for ep := range int64(4) {
			specs = append(specs, EpochSpec{Epoch: ep, Shape: shape, ShuffleSeed: ptr(seed)})
		}
	}
	specs = append(specs, specs[0], specs[5], specs[5])
	for k, spec := range specs {
		fresh, err := New(streams, o)
		if err != nil {
			t.Fatal(err)
		}
		want, got := samples(fresh, spec), samples(shared, spec)
		if !slices.Equal(want, got) {
			t.Fatalf("spec %d (epoch %d, seed %d): the shared Planner gives %v, a fresh one %v", k, spec.Epoch, *spec.ShuffleSeed, got, want)
		}
	}
	c, err := shared.config(specs[1])
	if err != nil {
		t.Fatal(err)
	}
	a, _ := shared.resample(&c, -1)
	b, _ := shared.resample(&c, -1)
	if a != b {
		t.Fatal("two Epochs of one epoch resampled it twice")
	}
}
