package shuffle

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestPy1eChunks forces tiny evaluation windows so that the chunked path
// (margins on both sides of every chunk) is compared with one-pass output.
func TestPy1eChunks(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	for it := range 30 {
		sizes := make([]int64, 1+r.IntN(10))
		for i := range sizes {
			sizes[i] = int64(r.IntN(300))
		}
		p := Params{Algo: Py1e, UnitSizes: sizes, NumCanonicalNodes: 1 + r.IntN(3),
			Seed: int64(it), Epoch: 1, BlockSize: int64(1 + r.IntN(200))}
		want, err := Get(p)
		if err != nil {
			continue // a canonical node without samples
		}
		s, err := New(p)
		if err != nil {
			t.Fatal(err)
		}
		s.impl.(*py1e).chunk = int64(1 + r.IntN(40))
		got := make([]int64, s.Len())
		if err := s.Fill(got, 0); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(want, got) {
			t.Fatalf("case %d %+v: chunked output differs\nwant %v\ngot  %v", it, p, want, got)
		}
	}
}
