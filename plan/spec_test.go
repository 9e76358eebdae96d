package plan_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicedata/sluice/plan"
)

func ptr[T any](v T) *T { return &v }

// flat parses a nested JSON array into its C-order flattening.
func flat(t *testing.T, s string) []int64 {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	var out []int64
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case []any:
			for _, e := range x {
				walk(e)
			}
		case float64:
			out = append(out, int64(x))
		}
	}
	walk(v)
	return out
}

// TestSpecEndToEnd checks spec §12.5: two weighted streams, every batching
// method, and a resumed random epoch.
func TestSpecEndToEnd(t *testing.T) {
	streams := []plan.Stream{
		{ShardSizes: []int64{6, 6, 6, 5}, Proportion: ptr(0.75)},
		{ShardSizes: []int64{6, 5}, Proportion: ptr(0.25)},
	}
	for _, tc := range []struct {
		method string
		sample int64
		shape  [5]int
		work   string
	}{
		{plan.BatchingRandom, 0, [5]int{1, 2, 2, 3, 4},
			`[[[[[18,19,20,4],[11,8,7,6],[27,23,29,24]],[[21,5,22,3],[28,9,10,26],[-1,-1,-1,-1]]],[[[0,5,4,1],[17,6,11,12],[31,33,16,32]],[[3,2,8,10],[14,30,15,13],[-1,-1,-1,-1]]]]]`},
		{plan.BatchingStratified, 0, [5]int{1, 2, 2, 3, 4},
			`[[[[[18,1,19,2],[7,12,6,17],[5,16,3,8]],[[21,3,22,5],[10,15,11,14],[-1,-1,-1,-1]]],[[[20,0,31,28],[9,13,29,24],[4,10,33,26]],[[8,4,30,25],[6,11,32,23],[-1,-1,-1,-1]]]]]`},
		{plan.BatchingPerStream, 0, [5]int{1, 2, 2, 2, 4},
			`[[[[[18,19,20,21],[31,30,29,32]],[[22,8,7,6],[9,10,11,6]]],[[[1,2,0,3],[28,25,24,23]],[[5,4,12,17],[13,15,14,11]]]]]`},
		{plan.BatchingDevicePerStream, 0, [5]int{1, 2, 2, 3, 4},
			`[[[[[18,19,1,2],[22,8,5,4],[11,6,14,11]],[[29,32,24,23],[9,10,13,15],[4,3,10,8]]],[[[31,30,28,25],[7,6,12,17],[5,3,16,8]],[[20,21,0,3],[33,32,26,23],[-1,-1,-1,-1]]]]]`},
		{plan.BatchingRandom, 16, [5]int{1, 2, 2, 2, 4},
			`[[[[[11,8,7,6],[27,23,29,24]],[[28,9,10,26],[-1,-1,-1,-1]]],[[[17,6,11,12],[31,33,16,32]],[[14,30,15,13],[-1,-1,-1,-1]]]]]`},
	} {
		t.Run(tc.method, func(t *testing.T) {
			p, err := plan.New(streams, &plan.Options{Shuffle: true, BatchSize: 4, NumCanonicalNodes: 2,
				ShuffleBlockSize: 10, EpochSize: 40, BatchingMethod: tc.method})
			if err != nil {
				t.Fatal(err)
			}
			ep, err := p.Epoch(plan.EpochSpec{SampleInEpoch: tc.sample, Shape: plan.Shape{Nodes: 1, RanksPerNode: 2, WorkersPerRank: 2}})
			if err != nil {
				t.Fatal(err)
			}
			shape, work, err := ep.Work()
			if err != nil {
				t.Fatal(err)
			}
			if shape != tc.shape {
				t.Errorf("shape = %v, want %v", shape, tc.shape)
			}
			if d := cmp.Diff(flat(t, tc.work), work); d != "" {
				t.Errorf("work (-want +got):\n%s", d)
			}
			// Worker slices agree with the whole arrangement.
			per := shape[3] * shape[4]
			for r := range 2 {
				for w := range 2 {
					ids, err := ep.Worker(0, r, w)
					if err != nil {
						t.Fatal(err)
					}
					off := (r*2 + w) * per
					if d := cmp.Diff(work[off:off+per], ids); d != "" {
						t.Errorf("worker (0,%d,%d) (-want +got):\n%s", r, w, d)
					}
				}
			}
		})
	}
}

// TestSpecPartitionExamples checks the §9.4 examples through the planner:
// without shuffle and with one full stream, generate_work is the partition.
func TestSpecPartitionExamples(t *testing.T) {
	for _, tc := range []struct {
		name        string
		n           int64
		c, p, r, w  int
		b           int
		drop        int64
		ipn         int
		algo        string
		shape, work string
	}{
		{"orig_10_2_1", 10, 2, 1, 1, 1, 2, 0, 0, plan.PartitionOrig, "[1,1,1,5,2]", "[[0,5],[1,6],[2,7],[3,8],[4,9]]"},
		{"orig_10_2_2", 10, 2, 2, 2, 1, 2, 0, 0, plan.PartitionOrig, "[2,2,1,2,2]", "[[[[[0,2],[4,-1]]], [[[1,3],[3,-1]]]], [[[[5,7],[9,-1]]], [[[6,8],[8,-1]]]]]"},
		{"orig_10_2_2_drop4", 10, 2, 2, 2, 1, 2, 4, 0, plan.PartitionOrig, "[2,2,1,1,2]", "[[[[[2,4]]],[[[3,3]]]],[[[[7,9]]],[[[8,8]]]]]"},
		{"orig_7_3_1", 7, 3, 1, 2, 2, 1, 0, 0, plan.PartitionOrig, "[1,2,2,3,1]", "[[[[[0],[3],[6]],[[4],[1],[-1]]],[[[2],[5],[3]],[[1],[3],[-1]]]]]"},
		{"orig_5_1_2", 5, 1, 2, 1, 1, 2, 0, 0, plan.PartitionOrig, "[2,1,1,2,2]", "[[[[[0,2],[4,-1]]]],[[[[1,3],[3,-1]]]]]"},
		{"orig_2_4_1", 2, 4, 1, 1, 1, 1, 0, 0, plan.PartitionOrig, "[1,1,1,4,1]", "[[[[[0],[1],[0],[1]]]]]"},
		{"relaxed_12_2_3", 12, 2, 3, 1, 1, 2, 0, 2, plan.PartitionRelaxed, "[3,1,1,2,2]", "[[[[[0,1],[3,4]]]],[[[[2,6],[5,9]]]],[[[[7,8],[10,11]]]]]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := plan.New([]plan.Stream{{ShardSizes: []int64{tc.n}}}, &plan.Options{BatchSize: tc.b,
				NumCanonicalNodes: tc.c, PartitionAlgo: tc.algo})
			if err != nil {
				t.Fatal(err)
			}
			ep, err := p.Epoch(plan.EpochSpec{SampleInEpoch: tc.drop, InitialPhysicalNodes: tc.ipn,
				Shape: plan.Shape{Nodes: tc.p, RanksPerNode: tc.r, WorkersPerRank: tc.w}})
			if err != nil {
				t.Fatal(err)
			}
			shape, work, err := ep.Work()
			if err != nil {
				t.Fatal(err)
			}
			var gotShape []int64
			for _, d := range shape {
				gotShape = append(gotShape, int64(d))
			}
			if d := cmp.Diff(flat(t, tc.shape), gotShape); d != "" {
				t.Errorf("shape (-want +got):\n%s", d)
			}
			if d := cmp.Diff(flat(t, tc.work), work); d != "" {
				t.Errorf("work (-want +got):\n%s", d)
			}
		})
	}
}

// TestSpecShuffleExample checks §10.7 through the planner: one node, one
// rank, batch 1 yields perm[seq[k]], where seq interleaves the two canonical
// rows 0..6 and 7..13.
func TestSpecShuffleExample(t *testing.T) {
	perms := map[string][2]string{
		"naive": {"2 6 12 5 7 9 8 11 10 1 13 3 0 4", "8 3 4 12 2 7 10 11 6 9 5 1 13 0"},
		"py1s":  {"4 5 3 10 9 8 11 0 1 2 12 13 6 7", "3 4 5 8 11 10 9 0 2 1 13 12 7 6"},
		"py2s":  {"5 4 3 11 9 8 10 2 0 1 12 13 6 7", "5 4 3 10 8 9 11 6 7 12 13 0 2 1"},
		"py1br": {"5 3 8 9 11 10 4 1 7 12 6 0 2 13", "5 4 9 10 3 8 11 2 6 1 13 0 12 7"},
		"py1e":  {"5 4 10 9 3 8 11 13 12 2 0 6 1 7", "8 3 4 5 10 11 9 0 1 2 12 7 13 6"},
	}
	for algo, eps := range perms {
		for epoch, s := range eps {
			var perm []int64
			if err := json.Unmarshal([]byte("["+joinSpaces(s)+"]"), &perm); err != nil {
				t.Fatal(err)
			}
			var want []int64
			for k := range 14 {
				want = append(want, perm[(k%2)*7+k/2])
			}
			p, err := plan.New([]plan.Stream{{ShardSizes: []int64{3, 5, 4, 2}}}, &plan.Options{Shuffle: true,
				ShuffleAlgo: algo, BatchSize: 1, NumCanonicalNodes: 2, ShuffleBlockSize: 8})
			if err != nil {
				t.Fatal(err)
			}
			ep, err := p.Epoch(plan.EpochSpec{Epoch: int64(epoch), Shape: plan.Shape{Nodes: 1, RanksPerNode: 1, WorkersPerRank: 1}})
			if err != nil {
				t.Fatal(err)
			}
			got, err := ep.Worker(0, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("%s epoch %d (-want +got):\n%s", algo, epoch, d)
			}
		}
	}
}

func joinSpaces(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c == ' ' {
			b[i] = ','
		}
	}
	return string(b)
}

// trimPadding drops trailing -1 entries.
func trimPadding(x []int64) []int64 {
	for len(x) > 0 && x[len(x)-1] < 0 {
		x = x[:len(x)-1]
	}
	return x
}

// TestResumeWholeGlobalBatches checks that the non-random batching methods
// resume by skipping sample_in_epoch / global_batch whole global batches
// (spec §12.2 step 4), on the streams of spec §12.5.
func TestResumeWholeGlobalBatches(t *testing.T) {
	streams := []plan.Stream{
		{ShardSizes: []int64{6, 6, 6, 5}, Proportion: ptr(0.75)},
		{ShardSizes: []int64{6, 5}, Proportion: ptr(0.25)},
	}
	shape := plan.Shape{Nodes: 1, RanksPerNode: 2, WorkersPerRank: 2}
	const G = 8
	for _, method := range []string{plan.BatchingStratified, plan.BatchingPerStream, plan.BatchingDevicePerStream, plan.BatchingRandom} {
		p, err := plan.New(streams, &plan.Options{Shuffle: true, BatchSize: 4, NumCanonicalNodes: 2,
			ShuffleBlockSize: 10, EpochSize: 40, BatchingMethod: method})
		if err != nil {
			t.Fatal(err)
		}
		full, err := p.Epoch(plan.EpochSpec{Shape: shape})
		if err != nil {
			t.Fatal(err)
		}
		fs, fw, err := full.Work()
		if err != nil {
			t.Fatal(err)
		}
		all := trimPadding(consumption(fs, fw))
		for _, sample := range []int64{8, 13, 16, 40} {
			ep, err := p.Epoch(plan.EpochSpec{SampleInEpoch: sample, Shape: shape})
			if err != nil {
				t.Fatal(err)
			}
			s, w, err := ep.Work()
			if err != nil {
				t.Fatal(err)
			}
			skip := int(sample) / G * G
			if method == plan.BatchingRandom {
				skip = int(sample) // drop_first works per sample
			}
			want := []int64{}
			if skip < len(all) {
				want = all[skip:]
			}
			got := append([]int64{}, trimPadding(consumption(s, w))...)
			if method != plan.BatchingRandom || sample%G == 0 {
				if d := cmp.Diff(want, got); d != "" {
					t.Errorf("%s resumed at %d (-want +got):\n%s", method, sample, d)
				}
			}
		}
	}
}

// TestRelaxedOntoOtherNodeCount resumes a run that started on 2 nodes onto
// 3 nodes (not a divisor or multiple of the 2 canonical nodes) with the same
// global batch: every global batch holds the samples of the first run's.
func TestRelaxedOntoOtherNodeCount(t *testing.T) {
	sizes := []int64{100, 37, 250, 13, 120}
	seed := int64(17)
	mk := func(b int) *plan.Planner {
		p, err := plan.New([]plan.Stream{{ShardSizes: sizes}}, &plan.Options{Shuffle: true, ShuffleSeed: &seed,
			NumCanonicalNodes: 2, BatchSize: b, ShuffleBlockSize: 64})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	first, err := mk(6).Epoch(plan.EpochSpec{Epoch: 2, Shape: plan.Shape{Nodes: 2, RanksPerNode: 2, WorkersPerRank: 2}})
	if err != nil {
		t.Fatal(err)
	}
	fs, fw, err := first.Work()
	if err != nil {
		t.Fatal(err)
	}
	all := consumption(fs, fw)
	const G = 24
	for _, drop := range []int64{0, 48, 240} {
		ep, err := mk(4).Epoch(plan.EpochSpec{Epoch: 2, SampleInEpoch: drop, InitialPhysicalNodes: 2,
			Shape: plan.Shape{Nodes: 3, RanksPerNode: 2, WorkersPerRank: 3}})
		if err != nil {
			t.Fatal(err)
		}
		s, w, err := ep.Work()
		if err != nil {
			t.Fatal(err)
		}
		got := consumption(s, w)
		rest := all[drop:]
		for b := 0; (b+1)*G <= len(rest); b++ {
			x := append([]int64{}, got[b*G:(b+1)*G]...)
			y := append([]int64{}, rest[b*G:(b+1)*G]...)
			slices.Sort(x)
			slices.Sort(y)
			if !slices.Equal(x, y) {
				t.Fatalf("drop %d: global batch %d = %v, want %v", drop, b, x, y)
			}
		}
	}
}
