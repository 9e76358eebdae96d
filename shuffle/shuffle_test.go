package shuffle_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicedata/sluice/shuffle"
)

type fixtureCase struct {
	Algo       string  `json:"algo"`
	ShardSizes []int64 `json:"shard_sizes"`
	NCN        int     `json:"num_canonical_nodes"`
	Seed       int64   `json:"seed"`
	Epoch      int64   `json:"epoch"`
	BlockSize  int64   `json:"block_size"`
	Perm       []int64 `json:"perm"`
}

func TestFixtures(t *testing.T) {
	b, err := os.ReadFile("testdata/shuffles.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Cases []fixtureCase `json:"cases"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("testdata/shuffles.json: %v", err)
	}
	if len(f.Cases) == 0 {
		t.Fatal("testdata/shuffles.json: no cases")
	}
	for i, c := range f.Cases {
		name := fmt.Sprintf("%d/%s/units=%d/ncn=%d/bs=%d", i, c.Algo, len(c.ShardSizes), c.NCN, c.BlockSize)
		t.Run(name, func(t *testing.T) {
			p := shuffle.Params{Algo: c.Algo, UnitSizes: c.ShardSizes, NumCanonicalNodes: c.NCN,
				Seed: c.Seed, Epoch: c.Epoch, BlockSize: c.BlockSize}
			got, err := shuffle.Get(p)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(c.Perm, got); d != "" {
				t.Fatalf("permutation mismatch (-want +got):\n%s", d)
			}
			checkFillMatches(t, p, got)
		})
	}
}

// Spec §10.7: units [3,5,4,2], C=2, seed 9176, block size 8.
func TestSpecVector(t *testing.T) {
	want := map[string][2]string{
		"naive": {"2 6 12 5 7 9 8 11 10 1 13 3 0 4", "8 3 4 12 2 7 10 11 6 9 5 1 13 0"},
		"py1s":  {"4 5 3 10 9 8 11 0 1 2 12 13 6 7", "3 4 5 8 11 10 9 0 2 1 13 12 7 6"},
		"py2s":  {"5 4 3 11 9 8 10 2 0 1 12 13 6 7", "5 4 3 10 8 9 11 6 7 12 13 0 2 1"},
		"py1br": {"5 3 8 9 11 10 4 1 7 12 6 0 2 13", "5 4 9 10 3 8 11 2 6 1 13 0 12 7"},
		"py1e":  {"5 4 10 9 3 8 11 13 12 2 0 6 1 7", "8 3 4 5 10 11 9 0 1 2 12 7 13 6"},
	}
	for algo, epochs := range want {
		for epoch, s := range epochs {
			t.Run(fmt.Sprintf("%s/epoch%d", algo, epoch), func(t *testing.T) {
				got, err := shuffle.Get(shuffle.Params{Algo: algo, UnitSizes: []int64{3, 5, 4, 2},
					NumCanonicalNodes: 2, Seed: 9176, Epoch: int64(epoch), BlockSize: 8})
				if err != nil {
					t.Fatal(err)
				}
				var w []int64
				for _, f := range strings.Fields(s) {
					v, _ := strconv.ParseInt(f, 10, 64)
					w = append(w, v)
				}
				if d := cmp.Diff(w, got); d != "" {
					t.Fatalf("(-want +got):\n%s", d)
				}
			})
		}
	}
}

// checkFillMatches asserts that Fill over assorted sub-ranges and At agree
// with the whole permutation.
func checkFillMatches(t *testing.T, p shuffle.Params, whole []int64) {
	t.Helper()
	s, err := shuffle.New(p)
	if err != nil {
		t.Fatal(err)
	}
	n := int64(len(whole))
	if s.Len() != n {
		t.Fatalf("Len = %d, want %d", s.Len(), n)
	}
	r := rand.New(rand.NewPCG(uint64(n), 1))
	for range 20 {
		if n == 0 {
			break
		}
		lo := r.Int64N(n)
		hi := lo + 1 + r.Int64N(min(n-lo, 1+n/4))
		dst := make([]int64, hi-lo)
		if err := s.Fill(dst, lo); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(whole[lo:hi], dst); d != "" {
			t.Fatalf("Fill [%d,%d) mismatch (-want +got):\n%s", lo, hi, d)
		}
		v, err := s.At(lo)
		if err != nil || v != whole[lo] {
			t.Fatalf("At(%d) = %d, %v; want %d", lo, v, err, whole[lo])
		}
	}
	if h := s.ChunkHint(); h < 1 {
		t.Fatalf("ChunkHint = %d", h)
	}
	// Canonical node ranges tile [0, n).
	var prev int64
	for c := range s.NumCanonicalNodes() {
		b, e := s.NodeRange(c)
		if b != prev || e < b {
			t.Fatalf("NodeRange(%d) = [%d,%d), previous end %d", c, b, e, prev)
		}
		prev = e
	}
	if prev != n {
		t.Fatalf("node ranges end at %d, want %d", prev, n)
	}
}

// TestProperties checks, over random unit sizes and settings, that every
// algorithm yields a permutation, that the canonical-node algorithms keep
// each node's samples inside the node, and that windowed Fill agrees with
// the whole permutation.
func TestProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 2))
	algos := []string{"naive", "py1s", "py2s", "py1br", "py1e", "py1b"}
	for it := range 60 {
		nu := 1 + r.IntN(12)
		sizes := make([]int64, nu)
		for i := range sizes {
			sizes[i] = int64(r.IntN(400))
			if r.IntN(8) == 0 {
				sizes[i] = 0
			}
		}
		var n int64
		for _, z := range sizes {
			n += z
		}
		ncn := 1 + r.IntN(8)
		bs := int64(2 + r.IntN(300))
		algo := algos[it%len(algos)]
		p := shuffle.Params{Algo: algo, UnitSizes: sizes, NumCanonicalNodes: ncn,
			Seed: int64(r.IntN(100000)), Epoch: int64(r.IntN(4)), BlockSize: bs}
		t.Run(fmt.Sprintf("%d/%s/n=%d/ncn=%d/bs=%d", it, algo, n, ncn, bs), func(t *testing.T) {
			whole, err := shuffle.Get(p)
			if algo == "py1e" && int64(ncn) > n {
				if !errors.Is(err, shuffle.ErrInvalid) {
					t.Fatalf("py1e with %d samples < %d nodes: err = %v", n, ncn, err)
				}
				return
			}
			if err != nil {
				if algo == "py1e" && errors.Is(err, shuffle.ErrInvalid) {
					return // a canonical node without samples
				}
				t.Fatal(err)
			}
			sorted := slices.Clone(whole)
			slices.Sort(sorted)
			for i, v := range sorted {
				if v != int64(i) {
					t.Fatalf("not a permutation of [0,%d): sorted[%d] = %d", n, i, v)
				}
			}
			checkFillMatches(t, p, whole)
		})
	}
}

func TestInvalid(t *testing.T) {
	tests := []shuffle.Params{
		{Algo: "py9", UnitSizes: []int64{3}, NumCanonicalNodes: 1},
		{UnitSizes: []int64{3}, NumCanonicalNodes: 0},
		{UnitSizes: []int64{-1}, NumCanonicalNodes: 1},
		{UnitSizes: []int64{3}, NumCanonicalNodes: 1, Seed: -1},
		{UnitSizes: []int64{3}, NumCanonicalNodes: 4}, // py1e: empty canonical node
		{Algo: "py1br", UnitSizes: []int64{3}, NumCanonicalNodes: 1, BlockSize: 1},
		{UnitSizes: []int64{1 << 51, 1 << 51, 1 << 51}, NumCanonicalNodes: 1},
	}
	for i, p := range tests {
		if _, err := shuffle.New(p); !errors.Is(err, shuffle.ErrInvalid) {
			t.Errorf("case %d: err = %v, want ErrInvalid", i, err)
		}
	}
	s, err := shuffle.New(shuffle.Params{UnitSizes: []int64{5}, NumCanonicalNodes: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Fill(make([]int64, 3), 3); !errors.Is(err, shuffle.ErrInvalid) {
		t.Errorf("Fill past the end: err = %v", err)
	}
	if _, err := s.At(-1); !errors.Is(err, shuffle.ErrInvalid) {
		t.Errorf("At(-1): err = %v", err)
	}
}

func TestDefaults(t *testing.T) {
	if got := shuffle.DefaultBlockSize(1); got != 4_000_000 {
		t.Errorf("DefaultBlockSize(1) = %d", got)
	}
	if got := shuffle.DefaultBlockSize(64); got != 262144 {
		t.Errorf("DefaultBlockSize(64) = %d", got)
	}
	if got := shuffle.DefaultNumCanonicalNodes("py1s", 2); got != 128 {
		t.Errorf("DefaultNumCanonicalNodes(py1s, 2) = %d", got)
	}
	if got := shuffle.DefaultNumCanonicalNodes("py1e", 2); got != 2 {
		t.Errorf("DefaultNumCanonicalNodes(py1e, 2) = %d", got)
	}
	if a, err := shuffle.ParseAlgo(""); err != nil || a != "py1e" {
		t.Errorf("ParseAlgo(\"\") = %q, %v", a, err)
	}
}

func ExampleGet() {
	perm, err := shuffle.Get(shuffle.Params{
		Algo:              "py1e",
		UnitSizes:         []int64{3, 5, 4, 2}, // samples per shard
		NumCanonicalNodes: 2,
		Seed:              9176,
		Epoch:             0,
		BlockSize:         8,
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(perm)
	// Output: [5 4 10 9 3 8 11 13 12 2 0 6 1 7]
}

func ExampleShuffle_Fill() {
	s, err := shuffle.New(shuffle.Params{UnitSizes: []int64{3, 5, 4, 2}, NumCanonicalNodes: 2, Seed: 9176, BlockSize: 8})
	if err != nil {
		panic(err)
	}
	// Canonical node 1 only, without computing node 0's order.
	b, e := s.NodeRange(1)
	ids := make([]int64, e-b)
	if err := s.Fill(ids, b); err != nil {
		panic(err)
	}
	fmt.Println(b, e, ids)
	// Output: 7 14 [13 12 2 0 6 1 7]
}

// TestLazyNodesConcurrent fills every canonical node's positions from
// its own goroutine, the high nodes first, for each algorithm that
// prepares nodes on first use: the result must be Get's.
func TestLazyNodesConcurrent(t *testing.T) {
	sizes := make([]int64, 120)
	for i := range sizes {
		sizes[i] = 300 + int64(i%11)
	}
	for _, algo := range []string{shuffle.Py1s, shuffle.Py1b, shuffle.Py1br, shuffle.Py1e} {
		p := shuffle.Params{Algo: algo, UnitSizes: sizes, NumCanonicalNodes: 6, Seed: 3, Epoch: 1, BlockSize: 2000}
		want, err := shuffle.Get(p)
		if err != nil {
			t.Fatal(err)
		}
		s, err := shuffle.New(p)
		if err != nil {
			t.Fatal(err)
		}
		n := int64(len(want))
		got := make([]int64, n)
		var wg sync.WaitGroup
		for c := int64(5); c >= 0; c-- {
			lo, hi := n*c/6, n*(c+1)/6
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := s.Fill(got[lo:hi], lo); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if !slices.Equal(got, want) {
			t.Fatalf("%s: concurrent fills differ from Get", algo)
		}
	}
}
