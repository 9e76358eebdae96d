package shuffle

import (
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
)

// TestPy1eChunks forces tiny evaluation windows so that the chunked path
// (margins on both sides of every chunk) is compared with one-pass output;
// the sparse path is off.
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
		s.impl.(*py1e).sparseMax = -1
		got := make([]int64, s.Len())
		if err := s.Fill(got, 0); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(want, got) {
			t.Fatalf("case %d %+v: chunked output differs\nwant %v\ngot  %v", it, p, want, got)
		}
	}
}

// TestPy1eSparse compares short requests served by fillSparse with the
// whole permutation, with the default slack and with a slack of 1 that
// forces widened retries and fallbacks to the window path.
func TestPy1eSparse(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 8))
	for it := range 60 {
		sizes := make([]int64, 1+r.IntN(12))
		for i := range sizes {
			sizes[i] = int64(r.IntN(400))
		}
		p := Params{Algo: Py1e, UnitSizes: sizes, NumCanonicalNodes: 1 + r.IntN(3),
			Seed: int64(it), Epoch: int64(r.IntN(3)), BlockSize: int64(1 + r.IntN(500))}
		want, err := Get(p)
		if err != nil {
			continue // a canonical node without samples
		}
		s, err := New(p)
		if err != nil {
			t.Fatal(err)
		}
		e := s.impl.(*py1e)
		if it%2 == 1 {
			e.sparseSlack = 1
		}
		for range 20 {
			pos := r.Int64N(s.Len())
			n := 1 + r.Int64N(min(s.Len()-pos, 50))
			got := make([]int64, n)
			if err := s.Fill(got, pos); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(want[pos:pos+n], got) {
				t.Fatalf("case %d %+v [%d, %d): sparse output differs\nwant %v\ngot  %v", it, p, pos, pos+n, want[pos:pos+n], got)
			}
		}
	}
}

// TestPy1eSparseLarge checks fillSparse on one canonical node of 200K
// samples with the default block size (margins far larger than requests),
// at the start, the middle and the end of the node, without falling back.
func TestPy1eSparseLarge(t *testing.T) {
	sizes := make([]int64, 50)
	for i := range sizes {
		sizes[i] = 4000
	}
	p := Params{Algo: Py1e, UnitSizes: sizes, NumCanonicalNodes: 1, Seed: 17, Epoch: 2, BlockSize: 1 << 16}
	want, err := Get(p)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(p)
	if err != nil {
		t.Fatal(err)
	}
	e := s.impl.(*py1e)
	for _, pos := range []int64{0, 1, 31, 1000, 99_990, 100_000, 199_000, 199_968} {
		// One canonical node: node-relative positions are positions. The
		// default slack must not need the window path.
		got := make([]int64, 32)
		if !e.fillSparse(got, 0, pos, pos+32) {
			t.Fatalf("[%d, %d): fillSparse gave up", pos, pos+32)
		}
		if !slices.Equal(want[pos:pos+32], got) {
			t.Fatalf("[%d, %d): got %v, want %v", pos, pos+32, got, want[pos:pos+32])
		}
	}
}

// TestPy1eSparseParallel is TestPy1eSparseLarge with a block large enough
// that countKeep splits its spans over goroutines: the answer must not
// change.
func TestPy1eSparseParallel(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	sizes := make([]int64, 300)
	for i := range sizes {
		sizes[i] = 4000 + int64(i%7)
	}
	p := Params{Algo: Py1e, UnitSizes: sizes, NumCanonicalNodes: 1, Seed: 5, Epoch: 1, BlockSize: 1 << 20}
	want, err := Get(p)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(p)
	if err != nil {
		t.Fatal(err)
	}
	e := s.impl.(*py1e)
	n := int64(len(want))
	for _, pos := range []int64{0, 500_000, 1_080_000, n - 32} {
		got := make([]int64, 32)
		if !e.fillSparse(got, 0, pos, pos+32) {
			t.Fatalf("[%d, %d): fillSparse gave up", pos, pos+32)
		}
		if !slices.Equal(want[pos:pos+32], got) {
			t.Fatalf("[%d, %d): got %v, want %v", pos, pos+32, got, want[pos:pos+32])
		}
	}
}

// TestExpectedPos: fillSparse's guess lands where the expected number of
// inputs below is within its tolerance of the wanted rank (or within a
// bracket of that width), in the middle of a node and near both ends,
// where clipped shift ranges crowd the positions and slope-1 steps
// overshoot; and from a poor starting point too.
func TestExpectedPos(t *testing.T) {
	sizes := make([]int64, 400)
	for i := range sizes {
		sizes[i] = 4096
	}
	p := Params{Algo: Py1e, UnitSizes: sizes, NumCanonicalNodes: 1, Seed: 11, Epoch: 2, BlockSize: 1 << 20}
	s, err := New(p)
	if err != nil {
		t.Fatal(err)
	}
	e := s.impl.(*py1e)
	e.ready(0)
	m := float64(s.Len())
	for _, tol := range []float64{0.25, 16, 90} {
		for _, r := range []float64{1, 50, 3000, 70_000, m / 10, m / 2, m * 0.9, m - 70_000, m - 3000, m - 50, m - 1} {
			for _, start := range []float64{r, r + 200_000, r - 200_000} {
				x := e.expectedPos(0, r, start, tol)
				// A bracket narrower than max(0.5, tol) may end the
				// search: allow its width times the steepest slope
				// positions reach (a few inputs per position).
				if f := e.expectedBelow(0, x); math.Abs(f-r) > 4*max(0.5, tol)+0.5 {
					t.Errorf("tol %g, rank %g from %g: x %g has %g expected below", tol, r, start, x, f)
				}
			}
		}
	}
}

// TestExpectedBelowFastPath: expectedBelow's shortcut for spans whose
// inputs are all partial gives the general expression's value bit for
// bit, across a node (its edges, where shift ranges are clipped,
// included) and for spans of several sizes.
func TestExpectedBelowFastPath(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	sizes := make([]int64, 300)
	for i := range sizes {
		sizes[i] = int64(1 + r.IntN(5000))
	}
	s, err := New(Params{Algo: Py1e, UnitSizes: sizes, NumCanonicalNodes: 2, Seed: 3, Epoch: 1, BlockSize: 200_000})
	if err != nil {
		t.Fatal(err)
	}
	e := s.impl.(*py1e)
	e.ready(1)
	l := e.l
	// ref is expectedBelow without the shortcut.
	ref := func(c int, x float64) float64 {
		first, last := l.nodeSpan[c], l.nodeSpan[c+1]
		ns := l.spanPos[first]
		var sum float64
		for i := first; i < last; i++ {
			off := float64(l.spanPos[i] - ns)
			z := float64(l.spans[i].size())
			lb, w := e.low[i], e.width[i]
			tt := x - lb
			if w <= 0 {
				sum += clampF(math.Ceil(tt)-off, 0, z)
				continue
			}
			full := clampF(math.Floor(tt-w)-off+1, 0, z)
			part := clampF(math.Ceil(tt)-off, 0, z) - full
			if part > 0 {
				j0 := off + full
				sum += (part*tt - (part*j0 + part*(part-1)/2)) / w
			}
			sum += full
		}
		return sum
	}
	for c := range 2 {
		m := float64(l.spanPos[l.nodeSpan[c+1]] - l.spanPos[l.nodeSpan[c]])
		for k := range 400 {
			x := m * float64(k) / 399
			if k%3 == 1 {
				x += r.Float64() - 0.5
			}
			if got, want := e.expectedBelow(c, x), ref(c, x); got != want {
				// The sums run over the same spans in the same order
				// (ref's extra spans add exact 0s and whole counts).
				t.Fatalf("node %d, x %v: expectedBelow %v, general expression %v", c, x, got, want)
			}
		}
	}
}
