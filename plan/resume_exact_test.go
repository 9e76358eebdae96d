package plan_test

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/sluicedata/sluice/plan"
)

// runShape is one run's world: physical nodes, ranks per node, DataLoader
// workers per rank and per-device batch size.
type runShape struct{ P, R, W, B int }

func (s runShape) String() string { return fmt.Sprintf("%dx%dx%dw_b%d", s.P, s.R, s.W, s.B) }

func (s runShape) shape() plan.Shape {
	return plan.Shape{Nodes: s.P, RanksPerNode: s.R, WorkersPerRank: s.W}
}

// deliveries counts what every rank of an epoch yields when each rank
// takes at most steps batches (steps < 0: all), with RankBatches'
// DataLoader order, adding to into; it returns how many samples a rank yielded
// (checked equal over the ranks when steps >= 0).
func deliveries(t *testing.T, ep *plan.Epoch, s runShape, steps int, into map[int64]int) int64 {
	t.Helper()
	var yielded int64 = -1
	for p := range s.P {
		for r := range s.R {
			bs, err := ep.RankBatches(p, r)
			if err != nil {
				t.Fatal(err)
			}
			if steps >= 0 && len(bs) > steps {
				bs = bs[:steps]
			}
			var n int64
			for _, b := range bs {
				for _, x := range b {
					into[x]++
				}
				n += int64(len(b))
			}
			if steps >= 0 && yielded >= 0 && n != yielded {
				t.Fatalf("ranks yielded %d and %d samples before the stop", yielded, n)
			}
			yielded = n
		}
	}
	return yielded
}

// resumeRun is what stopAndResume observed.
type resumeRun struct {
	got   map[int64]int // deliveries of both runs
	first map[int64]int // deliveries of the stopped run
	whole map[int64]int // the same epoch played whole on the resumed shape
	check error         // the resumed epoch's ResumeCheck
	state plan.State    // the state the stopped run saved
}

// stopAndResume plays shape a for steps batches per rank, saves the state
// with a Tracker, resumes on shape b to the end of the epoch, and plays the
// same epoch whole on b.
func stopAndResume(t *testing.T, sizes []int64, opts func(B int) *plan.Options, a, b runShape, steps int) resumeRun {
	t.Helper()
	pa, err := plan.New([]plan.Stream{{ShardSizes: sizes}}, opts(a.B))
	if err != nil {
		t.Fatal(err)
	}
	ta := pa.NewTracker()
	spec, err := ta.Begin(a.shape())
	if err != nil {
		t.Fatal(err)
	}
	ea, err := pa.Epoch(spec)
	if err != nil {
		t.Fatal(err)
	}
	got := map[int64]int{}
	yielded := deliveries(t, ea, a, steps, got)
	first := maps.Clone(got)
	state, err := ta.State(plan.World{Nodes: a.P, RanksPerNode: a.R}, yielded)
	if err != nil {
		t.Fatal(err)
	}
	pb, err := plan.New([]plan.Stream{{ShardSizes: sizes}}, opts(b.B))
	if err != nil {
		t.Fatal(err)
	}
	tb := pb.NewTracker()
	if err := tb.Load(state); err != nil {
		t.Fatal(err)
	}
	spec, err = tb.Begin(b.shape())
	if err != nil {
		t.Fatal(err)
	}
	eb, err := pb.Epoch(spec)
	if err != nil {
		t.Fatalf("resume %v on %v: %v", state, b, err)
	}
	deliveries(t, eb, b, -1, got)
	spec.SampleInEpoch = 0
	ew, err := pb.Epoch(spec)
	if err != nil {
		t.Fatal(err)
	}
	whole := map[int64]int{}
	deliveries(t, ew, b, -1, whole)
	return resumeRun{got: got, first: first, whole: whole, check: eb.ResumeCheck(), state: state}
}

// canonical returns how often each sample occurs in the canonical order
// dealt to p nodes (one rank, worker and sample per batch: no padding).
func canonical(t *testing.T, sizes []int64, opts func(B int) *plan.Options, p int) map[int64]int {
	t.Helper()
	pl, err := plan.New([]plan.Stream{{ShardSizes: sizes}}, opts(1))
	if err != nil {
		t.Fatal(err)
	}
	s := runShape{p, 1, 1, 1}
	ep, err := pl.Epoch(plan.EpochSpec{Shape: s.shape()})
	if err != nil {
		t.Fatal(err)
	}
	m := map[int64]int{}
	deliveries(t, ep, s, -1, m)
	return m
}

// exactOnce reports whether got holds every entry of canon and, beyond
// those, only repeats that whole also has beyond canon.
func exactOnce(got, whole, canon map[int64]int) bool {
	for id, k := range canon {
		if got[id] < k {
			return false
		}
	}
	for id, k := range got {
		if extra := k - canon[id]; extra > 0 && extra > whole[id]-canon[id] {
			return false
		}
	}
	return true
}

// TestResumeAnotherGlobalBatch is the reported case: 240 samples in 24
// shards, 4 canonical nodes, 4 ranks stop after 4 batches of 5
// (sample_in_epoch 80) and 1 node × 3 ranks × 2 workers resume. The 160
// remaining samples do not divide over 3 ranks, so MosaicML's partition
// (get_partitions_orig) pads the node by repeating 2 of them; Sluice plays
// the same order and ResumeCheck says so.
func TestResumeAnotherGlobalBatch(t *testing.T) {
	sizes := make([]int64, 24)
	for i := range sizes {
		sizes[i] = 10
	}
	opts := func(B int) *plan.Options {
		return &plan.Options{Shuffle: true, NumCanonicalNodes: 4, BatchSize: B}
	}
	run := stopAndResume(t, sizes, opts, runShape{4, 1, 1, 5}, runShape{1, 3, 2, 5}, 4)
	got, whole, check, state := run.got, run.whole, run.check, run.state
	if state.SampleInEpoch != 80 {
		t.Fatalf("state %+v: want sample_in_epoch 80", state)
	}
	var twice []int64
	for id := range int64(240) {
		switch got[id] {
		case 1:
		case 2:
			twice = append(twice, id)
		default:
			t.Errorf("sample %d delivered %d times", id, got[id])
		}
	}
	if len(twice) != 2 {
		t.Errorf("samples delivered twice: %v, want the 2 of the rank padding", twice)
	}
	if !errors.Is(check, plan.ErrInexactResume) || !strings.Contains(check.Error(), "repeats 2 of them (2 in all)") {
		t.Errorf("ResumeCheck = %v, want the rank padding named", check)
	}
	for id, k := range whole {
		if k != 1 {
			t.Fatalf("the whole epoch on 3 ranks delivers %d %d times", id, k)
		}
	}
	// per_stream skips whole global batches of the resumed world (15):
	// 80 is not a multiple, so 5 samples come again.
	ps := func(B int) *plan.Options {
		return &plan.Options{Shuffle: true, NumCanonicalNodes: 4, BatchSize: B, BatchingMethod: plan.BatchingPerStream}
	}
	run = stopAndResume(t, sizes, ps, runShape{4, 1, 1, 5}, runShape{1, 3, 2, 5}, 4)
	got, check = run.got, run.check
	if !errors.Is(check, plan.ErrInexactResume) || !strings.Contains(check.Error(), "global batch size 15") {
		t.Errorf("per_stream ResumeCheck = %v, want the global batch named", check)
	}
	var again int
	for _, k := range got {
		again += k - 1
	}
	if again < 5 {
		t.Errorf("per_stream: %d repeats, want at least the 5 of the partial global batch", again)
	}
	// Batch 8 (sample_in_epoch 96, 144 left): exact.
	run = stopAndResume(t, sizes, opts, runShape{4, 1, 1, 8}, runShape{1, 3, 2, 8}, 3)
	got, check = run.got, run.check
	if check != nil {
		t.Errorf("ResumeCheck = %v, want nil", check)
	}
	for id := range int64(240) {
		if got[id] != 1 {
			t.Errorf("batch 8: sample %d delivered %d times", id, got[id])
		}
	}
}

// TestResumeExactProperty stops and resumes over many shapes (nodes that
// divide the canonical node count or not, ranks, workers, batch sizes that
// divide the shard sizes or not, global batches that change or not) and
// asserts: whenever ResumeCheck reports the resume exact, the two runs
// together deliver every entry of the canonical order once and repeat only
// samples the whole epoch on the resumed shape repeats too (with a dataset
// that divides evenly, every sample exactly once); whenever it reports it
// inexact, they do not. A resume on the stopping ranks is exact but in an
// epoch's last steps.
func TestResumeExactProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	iters := 150
	if testing.Short() {
		iters = 40
	}
	var exact, inexact int
	for it := range iters {
		nShards := 1 + rng.IntN(10)
		sizes := make([]int64, nShards)
		var n int64
		for k := range sizes {
			sizes[k] = int64(5 + rng.IntN(30))
			n += sizes[k]
		}
		ncn := []int{1, 2, 4, 6, 8}[rng.IntN(5)]
		algo := []string{plan.PartitionOrig, plan.PartitionRelaxed}[rng.IntN(2)]
		seed := int64(rng.IntN(1000))
		batching := plan.BatchingRandom
		if rng.IntN(5) == 0 {
			batching = []string{plan.BatchingPerStream, plan.BatchingStratified}[rng.IntN(2)]
		}
		opts := func(B int) *plan.Options {
			return &plan.Options{Shuffle: true, ShuffleSeed: &seed, NumCanonicalNodes: ncn, BatchSize: B,
				PartitionAlgo: algo, ShuffleBlockSize: 32, BatchingMethod: batching}
		}
		pick := func() runShape {
			ds := divisors(ncn)
			return runShape{ds[rng.IntN(len(ds))], 1 + rng.IntN(4), 1 + rng.IntN(3), 1 + rng.IntN(6)}
		}
		a := pick()
		b := pick()
		if rng.IntN(4) == 0 {
			b = a
			b.W = 1 + rng.IntN(3)
		}
		if algo == plan.PartitionRelaxed && rng.IntN(3) == 0 {
			// A node count that neither divides nor is divided by the
			// canonical count, with the global batch kept (relaxed re-deal).
			b = runShape{a.P + 1, a.R, a.W, a.B}
			if (a.P*a.B)%b.P != 0 || ncn%b.P == 0 || b.P%ncn == 0 {
				b = a
			}
			b.B = a.P * a.B / b.P
		}
		if batching != plan.BatchingRandom {
			// Their global batches depend on the global batch size, which
			// the state does not record: keep it.
			b.P, b.R, b.B = a.P, a.R, a.B
			if rng.IntN(2) == 0 && a.R%2 == 0 {
				b.R, b.B = a.R/2, a.B*2
			}
		}
		// Every rank of the stopping run yields full batches.
		maxSteps := int(n/int64(a.P*a.R*a.B)) - a.W
		if maxSteps < 1 {
			continue
		}
		steps := 1 + rng.IntN(maxSteps)
		name := fmt.Sprintf("%d_%s_%s_ncn%d_n%d_%v_to_%v_steps%d", it, batching, algo, ncn, n, a, b, steps)
		t.Run(name, func(t *testing.T) {
			run := stopAndResume(t, sizes, opts, a, b, steps)
			got, first, whole, check, state := run.got, run.first, run.whole, run.check, run.state
			cp := b.P
			if ncn%b.P != 0 && b.P%ncn != 0 {
				cp = a.P // relaxed re-deal of the initial partition
			}
			canon := canonical(t, sizes, opts, cp)
			same := exactOnce(got, whole, canon)
			if batching != plan.BatchingRandom {
				// Their epochs drop each stream's partial global batch
				// instead of padding: the runs must equal the whole epoch.
				canon = whole
				same = maps.Equal(got, whole)
			}
			for id, k := range first {
				// Nothing the stopped run delivered comes again, unless the
				// canonical order itself holds it more often.
				if got[id] > k && canon[id] <= k {
					same = false
				}
			}
			if a.P == b.P && a.R == b.R && check != nil && !strings.Contains(check.Error(), "only") {
				t.Fatalf("resume on the stopping shape reported inexact: %v", check)
			}
			switch {
			case check == nil && !same:
				t.Fatalf("state %+v: ResumeCheck says exact, but the runs differ from the whole epoch", state)
			case check != nil && same:
				t.Fatalf("state %+v: ResumeCheck says %v, but the runs equal the whole epoch", state, check)
			case check != nil && !errors.Is(check, plan.ErrInexactResume):
				t.Fatalf("ResumeCheck error %v does not match ErrInexactResume", check)
			}
			if check == nil {
				exact++
				if batching == plan.BatchingRandom && n%int64(ncn) == 0 && n%int64(b.P*b.R) == 0 && b.P <= ncn {
					for id := range n {
						if got[id] != 1 {
							t.Fatalf("sample %d delivered %d times", id, got[id])
						}
					}
				}
			} else {
				inexact++
			}
		})
	}
	t.Logf("%d exact resumes, %d inexact", exact, inexact)
}
