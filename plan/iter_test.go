package plan_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sluicedata/sluice/plan"
)

// drain concatenates everything a WorkerIter yields and checks its
// segment rules: a first segment of at most one batch, no empty segment
// before the end, and the advertised length.
func drain(t *testing.T, it *plan.WorkerIter, batch int) []int64 {
	t.Helper()
	var out [][]int64
	var all []int64
	for {
		seg, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if len(seg) == 0 {
			break
		}
		if len(out) == 0 && it.Len() > batch && len(seg) > batch {
			t.Fatalf("first segment has %d entries, more than a batch of %d", len(seg), batch)
		}
		out = append(out, seg)
		all = append(all, seg...)
	}
	if len(all) != it.Len() || it.Remaining() != 0 {
		t.Fatalf("yielded %d entries, Len %d, Remaining %d", len(all), it.Len(), it.Remaining())
	}
	// Segments handed out earlier are never modified by later calls.
	var again []int64
	for _, s := range out {
		again = append(again, s...)
	}
	if !slices.Equal(again, all) {
		t.Fatal("an earlier segment changed")
	}
	return all
}

// TestWorkerIterMatchesWorker checks that the lazy iterator yields exactly
// Worker's slice for every worker, over random configurations: every
// shuffle algorithm, resampled streams, every batching method, resumption.
func TestWorkerIterMatchesWorker(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	algos := []string{plan.AlgoNaive, plan.AlgoPy1s, plan.AlgoPy2s, plan.AlgoPy1br, plan.AlgoPy1e, plan.AlgoPy1b, ""}
	batchings := []string{plan.BatchingRandom, plan.BatchingRandom, plan.BatchingStratified, plan.BatchingPerStream, plan.BatchingDevicePerStream}
	iters := 40
	if testing.Short() {
		iters = 12
	}
	for i := range iters {
		algo := algos[rng.IntN(len(algos))]
		batching := batchings[rng.IntN(len(batchings))]
		var streams []plan.Stream
		for range 1 + rng.IntN(2) {
			sizes := make([]int64, 1+rng.IntN(6))
			for k := range sizes {
				sizes[k] = int64(5 + rng.IntN(60))
			}
			s := plan.Stream{ShardSizes: sizes}
			if rng.IntN(3) == 0 {
				r := 1.5
				s.Repeat = &r
			}
			streams = append(streams, s)
		}
		shape := plan.Shape{Nodes: 1 + rng.IntN(2), RanksPerNode: 1 + rng.IntN(3), WorkersPerRank: 1 + rng.IntN(3)}
		seed := int64(rng.IntN(1000))
		o := &plan.Options{Shuffle: algo != "", ShuffleAlgo: algo, ShuffleSeed: &seed, BatchSize: 1 + rng.IntN(4),
			ShuffleBlockSize: int64(4 + rng.IntN(30)), NumCanonicalNodes: shape.Nodes * (1 + rng.IntN(2)),
			BatchingMethod: batching}
		t.Run(fmt.Sprintf("%d_%s_%s", i, algo, batching), func(t *testing.T) {
			p, err := plan.New(streams, o)
			if err != nil {
				t.Fatal(err)
			}
			resume := int64(0)
			if rng.IntN(2) == 0 {
				resume = rng.Int64N(p.EpochSize())
			}
			ep, err := p.Epoch(plan.EpochSpec{Epoch: int64(rng.IntN(3)), SampleInEpoch: resume, Shape: shape})
			if err != nil {
				t.Skipf("configuration rejected: %v", err)
			}
			for node := range shape.Nodes {
				for rank := range shape.RanksPerNode {
					for w := range shape.WorkersPerRank {
						it, err := ep.WorkerIter(node, rank, w)
						if err != nil {
							t.Fatal(err)
						}
						got := drain(t, it, o.BatchSize)
						want, err := ep.Worker(node, rank, w)
						if err != nil {
							t.Fatal(err)
						}
						if !slices.Equal(got, want) {
							t.Fatalf("worker (%d, %d, %d): iterator %v, Worker %v", node, rank, w, got, want)
						}
					}
				}
			}
			if _, err := ep.WorkerIter(shape.Nodes, 0, 0); err == nil {
				t.Fatal("WorkerIter outside the shape: no error")
			}
		})
	}
}

// TestWorkerIterLongEpoch runs a 300K-sample epoch on one worker (positions
// spanning several of the shuffle's chunks): the first batch, then the rest.
func TestWorkerIterLongEpoch(t *testing.T) {
	sizes := make([]int64, 300)
	for k := range sizes {
		sizes[k] = 1000
	}
	for _, algo := range []string{plan.AlgoPy1e, plan.AlgoPy1s, plan.AlgoPy1br} {
		t.Run(algo, func(t *testing.T) {
			p, err := plan.New([]plan.Stream{{ShardSizes: sizes}}, &plan.Options{Shuffle: true, ShuffleAlgo: algo,
				BatchSize: 8, ShuffleBlockSize: 5000})
			if err != nil {
				t.Fatal(err)
			}
			ep, err := p.Epoch(plan.EpochSpec{SampleInEpoch: 1234, Shape: plan.Shape{Nodes: 1, RanksPerNode: 1, WorkersPerRank: 1}})
			if err != nil {
				t.Fatal(err)
			}
			it, err := ep.WorkerIter(0, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			segs := 0
			var got []int64
			for {
				seg, err := it.Next()
				if err != nil {
					t.Fatal(err)
				}
				if len(seg) == 0 {
					break
				}
				segs++
				got = append(got, seg...)
			}
			want, err := ep.Worker(0, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Fatal("iterator differs from Worker")
			}
			if segs != 2 {
				t.Fatalf("%d segments; want the first batch, then the rest", segs)
			}
		})
	}
}
