package partition_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicedata/sluice/partition"
)

type fixtureCase struct {
	Algo      string  `json:"algo"`
	N         int64   `json:"num_samples"`
	NCN       int     `json:"num_canonical_nodes"`
	P         int     `json:"num_physical_nodes"`
	R         int     `json:"ranks_per_node"`
	W         int     `json:"workers_per_rank"`
	B         int     `json:"batch_size"`
	DropFirst int64   `json:"drop_first"`
	Initial   *int    `json:"initial_physical_nodes"`
	Shape     []int   `json:"shape"`
	IDs       []int64 `json:"ids"`
}

func (c fixtureCase) params() partition.Params {
	p := partition.Params{Algo: c.Algo, NumSamples: c.N, NumCanonicalNodes: c.NCN, NumPhysicalNodes: c.P,
		RanksPerNode: c.R, WorkersPerRank: c.W, BatchSize: c.B, DropFirst: c.DropFirst}
	if c.Initial != nil {
		p.InitialPhysicalNodes = *c.Initial
	}
	return p
}

func TestFixtures(t *testing.T) {
	b, err := os.ReadFile("testdata/partitions.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Cases []fixtureCase `json:"cases"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("testdata/partitions.json: %v", err)
	}
	if len(f.Cases) == 0 {
		t.Fatal("testdata/partitions.json: no cases")
	}
	for i, c := range f.Cases {
		t.Run(fmt.Sprintf("%d/%s/N=%d/C=%d/P=%d/R=%d/W=%d/B=%d/drop=%d", i, c.Algo, c.N, c.NCN, c.P, c.R, c.W, c.B, c.DropFirst), func(t *testing.T) {
			shape, ids, err := partition.Get(c.params())
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(c.Shape, func() []int { d := shape.Dims(); return d[:] }()); d != "" {
				t.Fatalf("shape (-want +got):\n%s", d)
			}
			if d := cmp.Diff(c.IDs, ids); d != "" {
				t.Fatalf("ids (-want +got):\n%s", d)
			}
			checkAccessors(t, c.params(), ids)
		})
	}
}

// Spec §9.4 worked examples.
func TestSpecExamples(t *testing.T) {
	tests := []struct {
		name  string
		p     partition.Params
		shape [5]int
		ids   []int64
	}{
		{"orig-10-2-1", partition.Params{Algo: "orig", NumSamples: 10, NumCanonicalNodes: 2, NumPhysicalNodes: 1, RanksPerNode: 1, WorkersPerRank: 1, BatchSize: 2},
			[5]int{1, 1, 1, 5, 2}, []int64{0, 5, 1, 6, 2, 7, 3, 8, 4, 9}},
		{"orig-10-2-2", partition.Params{Algo: "orig", NumSamples: 10, NumCanonicalNodes: 2, NumPhysicalNodes: 2, RanksPerNode: 2, WorkersPerRank: 1, BatchSize: 2},
			[5]int{2, 2, 1, 2, 2}, []int64{0, 2, 4, -1, 1, 3, 3, -1, 5, 7, 9, -1, 6, 8, 8, -1}},
		{"orig-10-2-2-drop4", partition.Params{Algo: "orig", NumSamples: 10, NumCanonicalNodes: 2, NumPhysicalNodes: 2, RanksPerNode: 2, WorkersPerRank: 1, BatchSize: 2, DropFirst: 4},
			[5]int{2, 2, 1, 1, 2}, []int64{2, 4, 3, 3, 7, 9, 8, 8}},
		{"orig-7-3", partition.Params{Algo: "orig", NumSamples: 7, NumCanonicalNodes: 3, NumPhysicalNodes: 1, RanksPerNode: 2, WorkersPerRank: 2, BatchSize: 1},
			[5]int{1, 2, 2, 3, 1}, []int64{0, 3, 6, 4, 1, -1, 2, 5, 3, 1, 3, -1}},
		{"orig-5-padding", partition.Params{Algo: "orig", NumSamples: 5, NumCanonicalNodes: 1, NumPhysicalNodes: 2, RanksPerNode: 1, WorkersPerRank: 1, BatchSize: 2},
			[5]int{2, 1, 1, 2, 2}, []int64{0, 2, 4, -1, 1, 3, 3, -1}},
		{"orig-degenerate", partition.Params{Algo: "orig", NumSamples: 2, NumCanonicalNodes: 4, NumPhysicalNodes: 1, RanksPerNode: 1, WorkersPerRank: 1, BatchSize: 1},
			[5]int{1, 1, 1, 4, 1}, []int64{0, 1, 0, 1}},
		{"relaxed-12-2-3", partition.Params{Algo: "relaxed", NumSamples: 12, NumCanonicalNodes: 2, NumPhysicalNodes: 3, RanksPerNode: 1, WorkersPerRank: 1, BatchSize: 2, InitialPhysicalNodes: 2},
			[5]int{3, 1, 1, 2, 2}, []int64{0, 1, 3, 4, 2, 6, 5, 9, 7, 8, 10, 11}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			shape, ids, err := partition.Get(tc.p)
			if err != nil {
				t.Fatal(err)
			}
			if shape.Dims() != tc.shape {
				t.Errorf("shape = %v, want %v", shape.Dims(), tc.shape)
			}
			if d := cmp.Diff(tc.ids, ids); d != "" {
				t.Errorf("ids (-want +got):\n%s", d)
			}
		})
	}
}

// checkAccessors asserts that At and AppendWorker agree with the flattened
// array.
func checkAccessors(t *testing.T, p partition.Params, all []int64) {
	t.Helper()
	pt, err := partition.New(p)
	if err != nil {
		t.Fatal(err)
	}
	s := pt.Shape()
	per := s.BatchesPerWorker * s.BatchSize
	k := 0
	for n := range s.Nodes {
		for r := range s.RanksPerNode {
			for w := range s.WorkersPerRank {
				got := pt.AppendWorker(nil, n, r, w)
				if d := cmp.Diff(all[k:k+per], got); d != "" {
					t.Fatalf("AppendWorker(%d,%d,%d) (-want +got):\n%s", n, r, w, d)
				}
				for b := range s.BatchesPerWorker {
					for i := range s.BatchSize {
						if v := pt.At(n, r, w, b, i); v != all[k+b*s.BatchSize+i] {
							t.Fatalf("At(%d,%d,%d,%d,%d) = %d, want %d", n, r, w, b, i, v, all[k+b*s.BatchSize+i])
						}
					}
				}
				k += per
			}
		}
	}
}

func TestInvalid(t *testing.T) {
	ok := partition.Params{NumSamples: 100, NumCanonicalNodes: 4, NumPhysicalNodes: 2, RanksPerNode: 2, WorkersPerRank: 2, BatchSize: 4}
	mod := func(f func(*partition.Params)) partition.Params { p := ok; f(&p); return p }
	tests := map[string]partition.Params{
		"algo":          mod(func(p *partition.Params) { p.Algo = "fancy" }),
		"zero samples":  mod(func(p *partition.Params) { p.NumSamples = 0 }),
		"zero ncn":      mod(func(p *partition.Params) { p.NumCanonicalNodes = 0 }),
		"zero ranks":    mod(func(p *partition.Params) { p.RanksPerNode = 0 }),
		"zero batch":    mod(func(p *partition.Params) { p.BatchSize = 0 }),
		"huge workers":  mod(func(p *partition.Params) { p.WorkersPerRank = 1 << 30 }),
		"negative drop": mod(func(p *partition.Params) { p.DropFirst = -1 }),
		"huge cluster": mod(func(p *partition.Params) {
			p.NumPhysicalNodes, p.RanksPerNode, p.WorkersPerRank, p.BatchSize = 1<<20, 1<<20, 1<<20, 1<<20
		}),
		"drop too far": mod(func(p *partition.Params) { p.DropFirst = 105 }),
		"indivisible":  mod(func(p *partition.Params) { p.NumCanonicalNodes = 3 }),
		"relaxed global batch": mod(func(p *partition.Params) {
			p.NumCanonicalNodes, p.NumPhysicalNodes, p.InitialPhysicalNodes, p.RanksPerNode, p.BatchSize = 2, 3, 2, 1, 1
		}),
		// C < P padding source out of range (upstream: numpy shape error).
		"padding": {Algo: "orig", NumSamples: 5, NumCanonicalNodes: 1, NumPhysicalNodes: 8, RanksPerNode: 1, WorkersPerRank: 1, BatchSize: 1},
	}
	for name, p := range tests {
		if _, err := partition.New(p); !errors.Is(err, partition.ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
	// Exactly at the limit is allowed: N + extra == drop_first.
	if _, err := partition.New(mod(func(p *partition.Params) { p.DropFirst = 104 })); err != nil {
		t.Errorf("drop_first at the limit: %v", err)
	}
}

func ExamplePartition_AppendWorker() {
	pt, err := partition.New(partition.Params{
		Algo: "orig", NumSamples: 10, NumCanonicalNodes: 2,
		NumPhysicalNodes: 2, RanksPerNode: 2, WorkersPerRank: 1, BatchSize: 2,
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(pt.Shape().Dims())
	// Node 1, rank 0, worker 0: two batches of two canonical positions.
	fmt.Println(pt.AppendWorker(nil, 1, 0, 0))
	// Output:
	// [2 2 1 2 2]
	// [5 7 9 -1]
}

func ExampleGet() {
	// relaxed re-deal after growing from 2 to 3 nodes (spec §9.4).
	shape, ids, err := partition.Get(partition.Params{
		Algo: "relaxed", NumSamples: 12, NumCanonicalNodes: 2, NumPhysicalNodes: 3,
		RanksPerNode: 1, WorkersPerRank: 1, BatchSize: 2, InitialPhysicalNodes: 2,
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(shape.Dims(), ids)
	// Output: [3 1 1 2 2] [0 1 3 4 2 6 5 9 7 8 10 11]
}
