package nprand

import (
	"slices"
	"testing"
)

// TestChoiceSparseTail checks the sparse tail-shuffle path (used for large
// populations) against the dense one: the same draws must give the same
// values.
func TestChoiceSparseTail(t *testing.T) {
	for _, c := range []struct{ n, k int }{{10001, 201}, {50000, 1001}, {50000, 50000}, {20000, 19999}} {
		dense, err := New(11).choice(c.n, c.k, c.n)
		if err != nil {
			t.Fatal(err)
		}
		sparse, err := New(11).choice(c.n, c.k, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(dense, sparse) {
			t.Fatalf("choice(%d, %d): sparse tail differs from dense", c.n, c.k)
		}
	}
}
