package nprand

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestShuffleSourcesMatchesShuffle: for random lengths (across the
// vector kernel's threshold and band edges), positions (0, n-1, repeats,
// a few or many) and generators (fresh or with a buffered half),
// ShuffleSources names the element ShuffleInt64 leaves at each position
// and leaves the generator where ShuffleInt64Tail from the lowest
// position does, on the vector path where the CPU has it and on the
// scalar one.
func TestShuffleSourcesMatchesShuffle(t *testing.T) {
	for _, vec := range vecPaths() {
		restore := setVec(vec)
		defer restore()
		r := rand.New(rand.NewPCG(11, 12))
		// Around the kernel's threshold (skipVecMin steps) and band edges.
		sizes := []int{0, 1, 2, 3, 5, 64, 383, 384, 385, 386, 387, 1024, 1025, 2048, 4095, 4096, 4097}
		var scratch []uint32
		for trial := range 400 {
			n := sizes[trial%len(sizes)]
			if trial >= 2*len(sizes) {
				n = 1 + r.IntN(10_000)
			}
			g := New(r.Uint64())
			if trial%3 == 1 {
				g.Uint32() // a buffered half for the first try
			}
			var at []int
			if n > 0 {
				switch trial % 4 {
				case 0:
					at = []int{r.IntN(n)}
				case 1:
					at = []int{0, n - 1}
				case 2:
					at = []int{n - 1 - r.IntN(min(n, 3))}
				default:
					for range 1 + r.IntN(40) {
						at = append(at, r.IntN(n))
					}
					at = append(at, at[0]) // a repeat
				}
			}
			x := make([]int64, n)
			for k := range x {
				x[k] = int64(k)
			}
			whole, tail := *g, *g
			want := slices.Clone(x)
			whole.ShuffleInt64(want)
			from := n
			for _, p := range at {
				from = min(from, p)
			}
			tail.ShuffleInt64Tail(x, from)
			got := make([]int, len(at))
			a := *g
			scratch = a.ShuffleSources(n, at, got, scratch)
			for k, p := range at {
				if int64(got[k]) != want[p] {
					t.Fatalf("vector %v, trial %d (n=%d, at %v): position %d holds %d, ShuffleSources says %d", vec, trial, n, at, p, want[p], got[k])
				}
			}
			if !a.has32 {
				a.buf, tail.buf = 0, 0 // a spent half's stale copy does not matter
			}
			if a != tail {
				t.Fatalf("vector %v, trial %d (n=%d, from %d): generator %+v, the tail shuffle's %+v", vec, trial, n, from, a, tail)
			}
		}
	}
}

// BenchmarkShuffleSources measures one position's source in a
// 4096-element shuffle from a random position (a resume's first batch
// asks for ~32 such, each in its own span), against the data shuffle's
// tail it replaces.
func BenchmarkShuffleSources(b *testing.B) {
	const n = 4096
	r := rand.New(rand.NewPCG(1, 2))
	g := New(1)
	b.Run("sources", func(b *testing.B) {
		var scratch []uint32
		at, src := []int{0}, []int{0}
		for b.Loop() {
			at[0] = r.IntN(n)
			h := *g
			scratch = h.ShuffleSources(n, at, src, scratch)
		}
	})
	b.Run("tail", func(b *testing.B) {
		x := make([]int64, n)
		for b.Loop() {
			from := r.IntN(n)
			for k := range x {
				x[k] = int64(k)
			}
			h := *g
			h.ShuffleInt64Tail(x, from)
		}
	})
}
