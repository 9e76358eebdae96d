package shuffle

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestGather compares Gather with the whole permutation over random
// configurations of every algorithm, random ranges and selections (dense,
// sparse, runs of a batch), and, for py1e, tiny windows that force chunking
// across node boundaries.
func TestGather(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 4))
	algos := []string{Naive, Py1s, Py2s, Py1br, Py1e, Py1b}
	for it := range 120 {
		sizes := make([]int64, 1+r.IntN(10))
		for i := range sizes {
			sizes[i] = int64(r.IntN(300))
		}
		p := Params{Algo: algos[it%len(algos)], UnitSizes: sizes, NumCanonicalNodes: 1 + r.IntN(3),
			Seed: int64(it), Epoch: int64(r.IntN(2)), BlockSize: int64(1 + r.IntN(200))}
		perm, err := Get(p)
		if err != nil {
			continue // a canonical node without samples
		}
		s, err := New(p)
		if err != nil {
			t.Fatal(err)
		}
		if e, ok := s.impl.(*py1e); ok && r.IntN(2) == 0 {
			e.chunk = int64(1 + r.IntN(40))
		}
		for range 5 {
			pos := r.Int64N(s.Len() + 1)
			n := r.Int64N(s.Len() - pos + 1)
			want := make([]uint64, (n+63)/64+r.Int64N(2))
			var exp []int64
			mode := r.IntN(3)
			for i := range n {
				var on bool
				switch mode {
				case 0:
					on = r.IntN(2) == 0
				case 1:
					on = r.IntN(20) == 0
				default:
					on = (i/4)%3 == 1 // runs of 4 out of 12
				}
				if on {
					want[i/64] |= 1 << (i % 64)
					exp = append(exp, perm[pos+i])
				}
			}
			// Bits beyond n are ignored.
			if len(want) > 0 && n%64 != 0 {
				want[len(want)-1] |= 1 << 63
			}
			got := make([]int64, len(exp)+1)
			k, err := s.Gather(got, pos, n, want)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got[:k], exp) {
				t.Fatalf("case %d %+v [%d, +%d) mode %d:\ngot  %v\nwant %v", it, p, pos, n, mode, got[:k], exp)
			}
		}
	}
}

func TestGatherErrors(t *testing.T) {
	s, err := New(Params{Algo: Py1e, UnitSizes: []int64{10, 10}, NumCanonicalNodes: 1, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	want := []uint64{^uint64(0)}
	for _, c := range []struct {
		pos, n int64
		want   []uint64
		dst    int
	}{
		{-1, 5, want, 64}, {15, 6, want, 64}, {0, 20, nil, 64}, {0, 20, want, 19},
	} {
		if _, err := s.Gather(make([]int64, c.dst), c.pos, c.n, c.want); !errors.Is(err, ErrInvalid) {
			t.Errorf("Gather(pos %d, n %d, %d words, dst %d): %v, want ErrInvalid", c.pos, c.n, len(c.want), c.dst, err)
		}
	}
}
