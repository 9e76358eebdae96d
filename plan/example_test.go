package plan_test

import (
	"fmt"

	"github.com/sluicedata/sluice/plan"
)

// A 10-sample dataset in two shards, two ranks with one worker each, batch
// size 2: each rank's samples, then the state dict after one step and where
// a resumed run continues.
func Example() {
	p, err := plan.New([]plan.Stream{{ShardSizes: []int64{6, 4}}}, &plan.Options{BatchSize: 2})
	if err != nil {
		panic(err)
	}
	world := plan.World{Nodes: 1, RanksPerNode: 2, Rank: 1}
	shape, _ := world.Shape(1)
	tr := p.NewTracker()
	spec, _ := tr.Begin(shape)
	ep, _ := p.Epoch(spec)
	for r := range 2 {
		b, _ := ep.RankBatches(0, r)
		fmt.Println("rank", r, b)
	}
	st, _ := tr.State(world, 2) // rank 1 yielded one batch of 2
	fmt.Println(string(st.AppendJSON(nil)))

	resumed := p.NewTracker()
	resumed.Load(st)
	spec, _ = resumed.Begin(shape)
	ep, _ = p.Epoch(spec)
	b, _ := ep.RankBatches(0, 1)
	fmt.Println("rank 1 after resume", b)
	// Output:
	// rank 0 [[0 2] [4 6] [8]]
	// rank 1 [[1 3] [5 7] [9]]
	// {"epoch": 0, "initial_physical_nodes": 1, "num_canonical_nodes": 1, "sample_in_epoch": 4, "shuffle_seed": 9176}
	// rank 1 after resume [[5 7] [9]]
}

// A node's shard schedule: the order in which its cache needs shards, and
// how far away each shard's next use is (for Belady eviction).
func ExampleEpoch_NodeSchedule() {
	p, err := plan.New([]plan.Stream{{ShardSizes: []int64{4, 4, 4}}}, &plan.Options{BatchSize: 2, NumCanonicalNodes: 3})
	if err != nil {
		panic(err)
	}
	ep, err := p.Epoch(plan.EpochSpec{Shape: plan.Shape{Nodes: 1, RanksPerNode: 2, WorkersPerRank: 1}})
	if err != nil {
		panic(err)
	}
	order, _ := ep.NodeOrder(0)
	sched, _ := ep.NodeSchedule(0)
	fmt.Println("order", order)
	fmt.Println("prefetch", sched.Shards())
	fmt.Println("shard 2 next used at", sched.NextUse(2, 3), "then", sched.NextUse(2, 9))
	// Output:
	// order [0 8 4 1 5 2 9 6 10 7 3 11]
	// prefetch [0 2 1]
	// shard 2 next used at 6 then 11
}
