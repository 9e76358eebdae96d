package plan_test

import (
	"testing"

	"github.com/sluicedata/sluice/plan"
)

// FuzzPlan plans small random configurations: no input may panic, and every
// planned epoch holds only valid sample IDs or -1, consistently between
// Work and Worker.
func FuzzPlan(f *testing.F) {
	f.Add([]byte{3, 10, 20, 5, 2, 1, 2, 2, 3, 0, 4, 0, 0, 1})
	f.Add([]byte{1, 7, 3, 1, 2, 2, 1, 1, 2, 1, 1, 1, 5, 0})
	f.Add([]byte{2, 0, 9, 4, 3, 1, 1, 4, 1, 2, 2, 3, 0, 2})
	algos := []string{plan.AlgoNaive, plan.AlgoPy1s, plan.AlgoPy2s, plan.AlgoPy1br, plan.AlgoPy1e, plan.AlgoPy1b}
	methods := []string{plan.BatchingRandom, plan.BatchingStratified, plan.BatchingPerStream, plan.BatchingDevicePerStream}
	f.Fuzz(func(t *testing.T, b []byte) {
		next := func() int {
			if len(b) == 0 {
				return 0
			}
			v := int(b[0])
			b = b[1:]
			return v
		}
		nStreams := 1 + next()%2
		var streams []plan.Stream
		for range nStreams {
			var sizes []int64
			for range 1 + next()%4 {
				sizes = append(sizes, int64(next()%40))
			}
			s := plan.Stream{ShardSizes: sizes}
			if nStreams > 1 {
				p := float64(1+next()%4) / 4
				s.Proportion = &p
			}
			streams = append(streams, s)
		}
		seed := int64(next())
		opts := &plan.Options{Shuffle: next()%2 == 0, ShuffleAlgo: algos[next()%len(algos)], ShuffleSeed: &seed,
			NumCanonicalNodes: 1 + next()%8, BatchSize: 1 + next()%4, ShuffleBlockSize: int64(2 + next()%20),
			BatchingMethod: methods[next()%len(methods)], PartitionAlgo: []string{plan.PartitionOrig, plan.PartitionRelaxed}[next()%2]}
		p, err := plan.New(streams, opts)
		if err != nil {
			return
		}
		shape := plan.Shape{Nodes: 1 + next()%4, RanksPerNode: 1 + next()%3, WorkersPerRank: 1 + next()%3}
		ep, err := p.Epoch(plan.EpochSpec{Epoch: int64(next() % 3), SampleInEpoch: int64(next()), Shape: shape,
			InitialPhysicalNodes: next() % 3})
		if err != nil {
			return
		}
		ws, work, err := ep.Work()
		if err != nil {
			return
		}
		if len(work) != ws[0]*ws[1]*ws[2]*ws[3]*ws[4] {
			t.Fatalf("work has %d entries for shape %v", len(work), ws)
		}
		for _, x := range work {
			if x < -1 || x >= p.NumSamples() {
				t.Fatalf("sample %d outside [-1, %d)", x, p.NumSamples())
			}
		}
		per := ws[3] * ws[4]
		for node := range shape.Nodes {
			for r := range shape.RanksPerNode {
				for w := range shape.WorkersPerRank {
					ids, err := ep.Worker(node, r, w)
					if err != nil {
						t.Fatal(err)
					}
					off := ((node*shape.RanksPerNode+r)*shape.WorkersPerRank + w) * per
					for i, x := range ids {
						if work[off+i] != x {
							t.Fatalf("worker (%d,%d,%d) entry %d = %d, Work has %d", node, r, w, i, x, work[off+i])
						}
					}
				}
			}
			if _, err := ep.NodeSchedule(node); err != nil {
				t.Fatal(err)
			}
		}
	})
}
