package plan_test

import (
	"encoding/json"
	"errors"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicedata/sluice/plan"
)

// stateFixture is one case of fixtures/order/state_dicts.json.
type stateFixture struct {
	Dataset string `json:"dataset"`
	Params  struct {
		Shuffle           bool   `json:"shuffle"`
		ShuffleAlgo       string `json:"shuffle_algo"`
		ShuffleSeed       int64  `json:"shuffle_seed"`
		NumCanonicalNodes int    `json:"num_canonical_nodes"`
		ShuffleBlockSize  *int64 `json:"shuffle_block_size"`
		BatchSize         int    `json:"batch_size"`
	} `json:"params"`
	WorldSize              int                   `json:"world_size"`
	WorkersPerRank         int                   `json:"workers_per_rank"`
	BatchesConsumedPerRank int64                 `json:"batches_consumed_per_rank"`
	StateDict              json.RawMessage       `json:"state_dict"`
	StatesAllRanks         map[string]plan.State `json:"states_all_ranks"`
	BatchesBefore          map[string][][]int64  `json:"batches_before"`
	BatchesAfterResume     map[string][][]int64  `json:"batches_after_resume"`
}

func loadStateFixtures(t testing.TB) []stateFixture {
	t.Helper()
	b, err := os.ReadFile("testdata/state_dicts.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Cases []stateFixture `json:"cases"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("state_dicts.json: %v", err)
	}
	if len(f.Cases) == 0 {
		t.Fatal("state_dicts.json: no cases")
	}
	return f.Cases
}

func TestStateJSONRoundTrip(t *testing.T) {
	for _, c := range loadStateFixtures(t) {
		s, err := plan.ParseState(c.StateDict)
		if err != nil {
			t.Fatal(err)
		}
		// Python's json.dumps(state, sort_keys=True) text.
		var m map[string]int64
		if err := json.Unmarshal(c.StateDict, &m); err != nil {
			t.Fatal(err)
		}
		want := []byte(`{"epoch": ` + itoa(m["epoch"]) + `, "initial_physical_nodes": ` + itoa(m["initial_physical_nodes"]) +
			`, "num_canonical_nodes": ` + itoa(m["num_canonical_nodes"]) + `, "sample_in_epoch": ` + itoa(m["sample_in_epoch"]) +
			`, "shuffle_seed": ` + itoa(m["shuffle_seed"]) + `}`)
		got := s.AppendJSON(nil)
		if string(got) != string(want) {
			t.Errorf("marshal = %s, want %s", got, want)
		}
		back, err := plan.ParseState(append(got, 0, 0, 0))
		if err != nil || back != s {
			t.Errorf("reparse = %+v, %v; want %+v", back, err, s)
		}
		compact, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		var viaJSON plan.State
		if err := json.Unmarshal(compact, &viaJSON); err != nil || viaJSON != s {
			t.Errorf("encoding/json round trip = %+v, %v; want %+v", viaJSON, err, s)
		}
	}
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

func TestParseStateOld(t *testing.T) {
	s, err := plan.ParseState([]byte(`{"epoch": 2, "sample_in_epoch": 64, "num_canonical_nodes": 8, "shuffle_seed": 1}`))
	if err != nil {
		t.Fatal(err)
	}
	want := plan.State{Epoch: 2, SampleInEpoch: 64, NumCanonicalNodes: 8, ShuffleSeed: 1}
	if s != want {
		t.Errorf("got %+v, want %+v", s, want)
	}
	if got := string(s.AppendJSON(nil)); got != `{"epoch": 2, "num_canonical_nodes": 8, "sample_in_epoch": 64, "shuffle_seed": 1}` {
		t.Errorf("encoding = %s", got)
	}
	var u plan.State
	if err := json.Unmarshal([]byte(`{"epoch": 0, "sample_in_epoch": 4.0, "shuffle_seed": 9176, "initial_physical_nodes": null, "extra": [1]}`), &u); err != nil {
		t.Fatal(err)
	}
	if u.SampleInEpoch != 4 || u.InitialPhysicalNodes != 0 {
		t.Errorf("got %+v", u)
	}
}

func TestParseStateErrors(t *testing.T) {
	for _, in := range []string{
		``, `[]`, `null`, `{}`, `{"epoch": 0}`,
		`{"epoch": 0, "sample_in_epoch": -1, "shuffle_seed": 0}`,
		`{"epoch": -2, "sample_in_epoch": 0, "shuffle_seed": 0}`,
		`{"epoch": 0, "sample_in_epoch": 1.5, "shuffle_seed": 0}`,
		`{"epoch": "0", "sample_in_epoch": 0, "shuffle_seed": 0}`,
		`{"epoch": 0, "sample_in_epoch": 0, "shuffle_seed": 0, "num_canonical_nodes": 1e300}`,
	} {
		if _, err := plan.ParseState([]byte(in)); !errors.Is(err, plan.ErrBadState) {
			t.Errorf("ParseState(%q) error = %v, want ErrBadState", in, err)
		}
	}
}

func FuzzParseState(f *testing.F) {
	f.Add([]byte(`{"epoch": 0, "initial_physical_nodes": 1, "num_canonical_nodes": 1, "sample_in_epoch": 100, "shuffle_seed": 9176}`))
	f.Add([]byte(`{"epoch": -1, "sample_in_epoch": 0, "shuffle_seed": 0}` + "\x00"))
	f.Add([]byte(`{"epoch": 1e3}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := plan.ParseState(b)
		if err != nil {
			return
		}
		back, err := plan.ParseState(s.AppendJSON(nil))
		if err != nil {
			t.Fatalf("re-parse of %s: %v", s.AppendJSON(nil), err)
		}
		if back != s {
			t.Fatalf("round trip %+v → %+v", s, back)
		}
	})
}

func TestWorldFromEnv(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	w, err := plan.WorldFromEnv(env(map[string]string{"RANK": "5", "WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "4", "NODE_RANK": "7"}))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(plan.World{Nodes: 2, RanksPerNode: 4, Rank: 5}, w); d != "" {
		t.Errorf("world (-want +got):\n%s", d)
	}
	if w.Node() != 1 || w.RankOfNode() != 1 {
		t.Errorf("node %d rank of node %d", w.Node(), w.RankOfNode())
	}
	w, err = plan.WorldFromEnv(env(nil))
	if err != nil || w != (plan.World{Nodes: 1, RanksPerNode: 1}) {
		t.Errorf("default world = %+v, %v", w, err)
	}
	for _, m := range []map[string]string{
		{"WORLD_SIZE": "6", "LOCAL_WORLD_SIZE": "4"},
		{"WORLD_SIZE": "x"},
		{"RANK": "2", "WORLD_SIZE": "2"},
		{"LOCAL_WORLD_SIZE": "0"},
		{"RANK": "-1"},
	} {
		if _, err := plan.WorldFromEnv(env(m)); !errors.Is(err, plan.ErrInvalid) {
			t.Errorf("WorldFromEnv(%v) error = %v", m, err)
		}
	}
}

func TestReplication(t *testing.T) {
	for _, tc := range []struct {
		in   plan.World
		want plan.World
	}{
		{plan.World{Nodes: 2, RanksPerNode: 4, Rank: 5, Replication: 2}, plan.World{Nodes: 1, RanksPerNode: 4, Rank: 2}},
		{plan.World{Nodes: 4, RanksPerNode: 2, Rank: 7, Replication: 2}, plan.World{Nodes: 2, RanksPerNode: 2, Rank: 3}},
		{plan.World{Nodes: 1, RanksPerNode: 8, Rank: 7, Replication: 8}, plan.World{Nodes: 1, RanksPerNode: 1, Rank: 0}},
		{plan.World{Nodes: 2, RanksPerNode: 2, Rank: 3}, plan.World{Nodes: 2, RanksPerNode: 2, Rank: 3}},
	} {
		got, err := tc.in.Parallel()
		if err != nil || got != tc.want {
			t.Errorf("%+v.Parallel() = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
	if _, err := (plan.World{Nodes: 1, RanksPerNode: 6, Replication: 4}).Parallel(); !errors.Is(err, plan.ErrInvalid) {
		t.Errorf("indivisible replication: %v", err)
	}
}

func TestTracker(t *testing.T) {
	p, err := plan.New([]plan.Stream{{ShardSizes: []int64{100, 100}}}, &plan.Options{Shuffle: true, BatchSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	world := plan.World{Nodes: 2, RanksPerNode: 2, Rank: 1}
	shape, err := world.Shape(2)
	if err != nil {
		t.Fatal(err)
	}
	tr := p.NewTracker()
	st, err := tr.State(world, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := (plan.State{Epoch: -1, NumCanonicalNodes: 2, ShuffleSeed: 9176, InitialPhysicalNodes: 2}); st != want {
		t.Errorf("state before iterating = %+v, want %+v", st, want)
	}
	spec, err := tr.Begin(shape)
	if err != nil {
		t.Fatal(err)
	}
	if spec.Epoch != 0 || spec.SampleInEpoch != 0 || spec.NumCanonicalNodes != 2 || spec.ShuffleBlockSize != 2_000_000 {
		t.Errorf("first epoch spec = %+v", spec)
	}
	st, _ = tr.State(world, 12)
	if want := (plan.State{Epoch: 0, SampleInEpoch: 48, NumCanonicalNodes: 2, ShuffleSeed: 9176, InitialPhysicalNodes: 2}); st != want {
		t.Errorf("state = %+v, want %+v", st, want)
	}

	// Resume onto one node: the state's NCN, seed and initial nodes win.
	tr2 := p.NewTracker()
	if err := tr2.Load(plan.State{Epoch: 3, SampleInEpoch: 40, NumCanonicalNodes: 8, ShuffleSeed: 7, InitialPhysicalNodes: 2}); err != nil {
		t.Fatal(err)
	}
	one := plan.World{Nodes: 1, RanksPerNode: 2}
	spec, err = tr2.Begin(plan.Shape{Nodes: 1, RanksPerNode: 2, WorkersPerRank: 1})
	if err != nil {
		t.Fatal(err)
	}
	if spec.Epoch != 3 || spec.SampleInEpoch != 40 || spec.NumCanonicalNodes != 8 || *spec.ShuffleSeed != 7 || spec.InitialPhysicalNodes != 2 || spec.ShuffleBlockSize != 500_000 {
		t.Errorf("resumed spec = %+v", spec)
	}
	st, _ = tr2.State(one, 10)
	if want := (plan.State{Epoch: 3, SampleInEpoch: 60, NumCanonicalNodes: 8, ShuffleSeed: 7, InitialPhysicalNodes: 2}); st != want {
		t.Errorf("resumed state = %+v, want %+v", st, want)
	}
	// The next iteration is epoch 4 from the start; the state is stale now.
	spec, _ = tr2.Begin(plan.Shape{Nodes: 1, RanksPerNode: 2, WorkersPerRank: 1})
	if spec.Epoch != 4 || spec.SampleInEpoch != 0 || spec.NumCanonicalNodes != 8 || *spec.ShuffleSeed != 7 {
		t.Errorf("epoch after resume = %+v", spec)
	}
	st, _ = tr2.State(one, 2)
	if want := (plan.State{Epoch: 4, SampleInEpoch: 4, NumCanonicalNodes: 8, ShuffleSeed: 7, InitialPhysicalNodes: 2}); st != want {
		t.Errorf("state after resume = %+v, want %+v", st, want)
	}

	// A stale state is ignored.
	tr3 := p.NewTracker()
	tr3.Begin(shape)
	tr3.Load(plan.State{Epoch: 0, SampleInEpoch: 8, NumCanonicalNodes: 4, ShuffleSeed: 1})
	spec, _ = tr3.Begin(shape)
	if spec.Epoch != 1 || spec.SampleInEpoch != 0 || *spec.ShuffleSeed != 9176 {
		t.Errorf("stale state used: %+v", spec)
	}
}

func TestParseEpochSize(t *testing.T) {
	for in, want := range map[string]int64{"100": 100, "100k": 100_000, "1.5m": 1_500_000, "77b": 77_000_000_000, "2t": 2_000_000_000_000, "0": 0, "1.2345k": 1234} {
		got, err := plan.ParseEpochSize(in)
		if err != nil || got != want {
			t.Errorf("ParseEpochSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "k", "1x", "nan", "1e30"} {
		if _, err := plan.ParseEpochSize(in); !errors.Is(err, plan.ErrInvalid) {
			t.Errorf("ParseEpochSize(%q) error = %v", in, err)
		}
	}
}

func TestOptionErrors(t *testing.T) {
	neg := int64(-1)
	for name, o := range map[string]plan.Options{
		"algo":      {ShuffleAlgo: "py3x"},
		"partition": {PartitionAlgo: "x"},
		"sampling":  {SamplingMethod: "x"},
		"batching":  {BatchingMethod: "x"},
		"seed":      {ShuffleSeed: &neg},
		"ncn":       {NumCanonicalNodes: -1},
		"batch":     {BatchSize: -1},
		"block":     {ShuffleBlockSize: -3},
	} {
		if _, err := plan.New([]plan.Stream{{ShardSizes: []int64{4}}}, &o); !errors.Is(err, plan.ErrInvalid) {
			t.Errorf("%s: error = %v", name, err)
		}
	}
	p, err := plan.New([]plan.Stream{{ShardSizes: []int64{4}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Epoch(plan.EpochSpec{Shape: plan.Shape{1, 1, 1}}); !errors.Is(err, plan.ErrInvalid) {
		t.Errorf("epoch without batch size: %v", err)
	}
}

func TestDependencyErrorsMatchErrInvalid(t *testing.T) {
	p, err := plan.New([]plan.Stream{{ShardSizes: []int64{3}}}, &plan.Options{Shuffle: true, NumCanonicalNodes: 4, BatchSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Epoch(plan.EpochSpec{Shape: plan.Shape{Nodes: 1, RanksPerNode: 1, WorkersPerRank: 1}})
	if !errors.Is(err, plan.ErrInvalid) {
		t.Errorf("py1e with fewer samples than canonical nodes: %v, want ErrInvalid", err)
	}
	p, err = plan.New([]plan.Stream{{ShardSizes: []int64{30}}}, &plan.Options{NumCanonicalNodes: 3, BatchSize: 1, PartitionAlgo: plan.PartitionOrig})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Epoch(plan.EpochSpec{Shape: plan.Shape{Nodes: 2, RanksPerNode: 1, WorkersPerRank: 1}})
	if !errors.Is(err, plan.ErrInvalid) {
		t.Errorf("orig with 3 canonical nodes on 2 nodes: %v, want ErrInvalid", err)
	}
}
