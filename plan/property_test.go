package plan_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sluicedata/sluice/plan"
)

// consumption flattens a work array in consumption order (batch, worker,
// node, rank, position), keeping -1.
func consumption(shape [5]int, work []int64) []int64 {
	P, R, W, nb, B := shape[0], shape[1], shape[2], shape[3], shape[4]
	out := make([]int64, 0, len(work))
	for b := range nb {
		for w := range W {
			for p := range P {
				for r := range R {
					off := (((p*R+r)*W+w)*nb + b) * B
					out = append(out, work[off:off+B]...)
				}
			}
		}
	}
	return out
}

func divisors(n int) []int {
	var d []int
	for i := 1; i <= n; i++ {
		if n%i == 0 {
			d = append(d, i)
		}
	}
	return d
}

// TestElasticProperties checks, over random shard sizes, seeds, algorithms
// and shapes (nodes dividing the canonical node count, 1–4 ranks and
// workers, batch 1–4):
//   - the global order does not depend on the shape: every full global batch
//     holds exactly the samples of the canonical order at its offset;
//   - every sample appears in each epoch, and only padding repeats;
//   - resuming at any sample_in_epoch continues with exactly the rest of the
//     canonical order, on any of the shapes.
func TestElasticProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	algos := []string{plan.AlgoNaive, plan.AlgoPy1s, plan.AlgoPy2s, plan.AlgoPy1br, plan.AlgoPy1e, plan.AlgoPy1b}
	iters := 60
	if testing.Short() {
		iters = 10
	}
	for it := range iters {
		nShards := 1 + rng.IntN(12)
		sizes := make([]int64, nShards)
		var n int64
		for k := range sizes {
			sizes[k] = int64(rng.IntN(40))
			n += sizes[k]
		}
		if n < 64 {
			sizes = append(sizes, 64)
			n += 64
		}
		ncn := []int{1, 2, 4, 8}[rng.IntN(4)]
		algo := algos[rng.IntN(len(algos))]
		seed := int64(rng.IntN(10000))
		epoch := int64(rng.IntN(3))
		opts := func(b int) *plan.Options {
			return &plan.Options{Shuffle: true, ShuffleAlgo: algo, ShuffleSeed: &seed, NumCanonicalNodes: ncn,
				ShuffleBlockSize: 16, BatchSize: b}
		}
		name := fmt.Sprintf("%d_%s_ncn%d_n%d", it, algo, ncn, n)
		t.Run(name, func(t *testing.T) {
			// The canonical order: one node, rank and worker, batch 1.
			p1, err := plan.New([]plan.Stream{{ShardSizes: sizes}}, opts(1))
			if err != nil {
				t.Fatal(err)
			}
			ep1, err := p1.Epoch(plan.EpochSpec{Epoch: epoch, Shape: plan.Shape{Nodes: 1, RanksPerNode: 1, WorkersPerRank: 1}})
			if err != nil {
				t.Fatal(err)
			}
			canon, err := ep1.Worker(0, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			// Short canonical rows repeat their last sample (spec §9.2).
			c := int64(ncn)
			if want := c * ((n + c - 1) / c); int64(len(canon)) != want {
				t.Fatalf("canonical order has %d samples, want %d", len(canon), want)
			}
			seen := make([]int, n)
			for _, x := range canon {
				if x < 0 || x >= n {
					t.Fatalf("canonical order holds %d", x)
				}
				seen[x]++
			}
			for x, k := range seen {
				if k == 0 {
					t.Fatalf("canonical order lacks sample %d", x)
				}
			}
			for range 4 {
				ds := divisors(ncn)
				shape := plan.Shape{Nodes: ds[rng.IntN(len(ds))], RanksPerNode: 1 + rng.IntN(4), WorkersPerRank: 1 + rng.IntN(4)}
				B := 1 + rng.IntN(4)
				p, err := plan.New([]plan.Stream{{ShardSizes: sizes}}, opts(B))
				if err != nil {
					t.Fatal(err)
				}
				for _, drop := range []int64{0, rng.Int64N(n + 1), n - 1, n} {
					checkShape(t, p, shape, B, epoch, drop, canon)
				}
			}
		})
	}
}

func checkShape(t *testing.T, p *plan.Planner, shape plan.Shape, B int, epoch, drop int64, canon []int64) {
	t.Helper()
	ep, err := p.Epoch(plan.EpochSpec{Epoch: epoch, SampleInEpoch: drop, Shape: shape})
	if err != nil {
		t.Fatalf("shape %+v B %d drop %d: %v", shape, B, drop, err)
	}
	ws, work, err := ep.Work()
	if err != nil {
		t.Fatal(err)
	}
	// orig rounds drop_first down to a multiple of the node count.
	start := drop - drop%int64(shape.Nodes)
	rest := canon[start:]
	order := consumption(ws, work)
	G := shape.NumRanks() * B
	// Every full global batch is the canonical order at its offset.
	for t0 := 0; (t0+1)*G <= len(rest) && (t0+1)*G <= len(order); t0++ {
		got := slices.Clone(order[t0*G : (t0+1)*G])
		want := slices.Clone(rest[t0*G : (t0+1)*G])
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("shape %+v B %d drop %d: global batch %d = %v, want %v", shape, B, drop, t0, got, want)
		}
	}
	// Exactly the rest, plus padding repeats of it.
	count := make(map[int64]int)
	real := 0
	for _, x := range order {
		if x >= 0 {
			count[x]++
			real++
		}
	}
	inRest := make(map[int64]bool, len(rest))
	for _, x := range rest {
		inRest[x] = true
		if count[x] == 0 {
			t.Fatalf("shape %+v B %d drop %d: sample %d missing", shape, B, drop, x)
		}
	}
	for x := range count {
		if !inRest[x] {
			t.Fatalf("shape %+v B %d drop %d: sample %d was already consumed", shape, B, drop, x)
		}
	}
	if extra := real - len(rest); extra < 0 || extra >= shape.Nodes*(shape.RanksPerNode+1) {
		t.Fatalf("shape %+v B %d drop %d: %d padding repeats", shape, B, drop, extra)
	}
	// Worker slices agree with the whole arrangement.
	per := ws[3] * ws[4]
	for node := range shape.Nodes {
		for r := range shape.RanksPerNode {
			for w := range shape.WorkersPerRank {
				ids, err := ep.Worker(node, r, w)
				if err != nil {
					t.Fatal(err)
				}
				off := ((node*shape.RanksPerNode+r)*shape.WorkersPerRank + w) * per
				if !slices.Equal(ids, work[off:off+per]) {
					t.Fatalf("worker (%d,%d,%d) disagrees with Work", node, r, w)
				}
			}
		}
	}
}

// TestScheduleMatchesOrder checks the node schedule against NodeOrder.
func TestScheduleMatchesOrder(t *testing.T) {
	p, err := plan.New([]plan.Stream{{ShardSizes: []int64{50, 30, 0, 70, 20}}}, &plan.Options{Shuffle: true, BatchSize: 3, NumCanonicalNodes: 4})
	if err != nil {
		t.Fatal(err)
	}
	ep, err := p.Epoch(plan.EpochSpec{Shape: plan.Shape{Nodes: 2, RanksPerNode: 2, WorkersPerRank: 3}})
	if err != nil {
		t.Fatal(err)
	}
	for node := range 2 {
		order, err := ep.NodeOrder(node)
		if err != nil {
			t.Fatal(err)
		}
		sc, err := ep.NodeSchedule(node)
		if err != nil {
			t.Fatal(err)
		}
		if sc.Len() != int64(len(order)) {
			t.Fatalf("schedule len %d, order len %d", sc.Len(), len(order))
		}
		var pos int64
		for _, run := range sc.Runs() {
			if run.Start != pos {
				t.Fatalf("run starts at %d, want %d", run.Start, pos)
			}
			for j := range run.Len {
				shard, _, err := p.Locate(order[pos+j])
				if err != nil || shard != run.Shard {
					t.Fatalf("position %d: sample %d in shard %d, run says %d", pos+j, order[pos+j], shard, run.Shard)
				}
			}
			pos += run.Len
		}
		// NextUse against a linear scan.
		for _, q := range []int64{0, 1, sc.Len() / 2, sc.Len() - 1, sc.Len()} {
			for shard := range p.NumShards() {
				want := int64(-1)
				for i := q; i < int64(len(order)); i++ {
					if s, _, _ := p.Locate(order[i]); s == shard {
						want = i
						break
					}
				}
				if got := sc.NextUse(shard, q); got != want {
					t.Errorf("node %d NextUse(%d, %d) = %d, want %d", node, shard, q, got, want)
				}
			}
		}
		shards := sc.Shards()
		if len(shards) == 0 || sc.Steps() == 0 || sc.StepStart(0) != 0 || sc.StepStart(sc.Steps()) != sc.Len() {
			t.Errorf("shards %v steps %d", shards, sc.Steps())
		}
	}
}
