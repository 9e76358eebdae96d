package shuffle

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/sluicedata/sluice/nprand"
)

// TestCountBelow compares countBelow with a plain loop over the same
// position expression, on random chunks whose bounds cut through them.
func TestCountBelow(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 4))
	var u [countChunk]float64
	var in [countChunk]int32
	for it := range 2000 {
		n := r.IntN(countChunk + 1)
		for k := range u[:n] {
			u[k] = r.Float64()
		}
		j := r.Int64N(1 << 40)
		lb := -r.Float64() * 1e6
		width := r.Float64() * 2e6
		x0 := float64(j) + lb + r.Float64()*width
		x1 := x0 + r.Float64()*width/2
		if it%7 == 0 {
			// Positions that are exact integers, ties with x0 and x1.
			for k := range u[:n] {
				u[k] = float64(r.IntN(4)) / 4
			}
			lb, width, x0, x1 = -2, 4, float64(j+int64(n/2)), float64(j+int64(n))
		}
		if it%11 == 0 {
			x1 = x0 - 1 // an empty keep range
		}
		var wantBelow int64 = 5
		var wantIn []int32
		for k, v := range u[:n] {
			x := float64(j+int64(k)) + (lb + float64(width*v))
			switch {
			case x < x0:
				wantBelow++
			case x < x1:
				wantIn = append(wantIn, int32(k))
			}
		}
		below, nk := countBelow(u[:n], j, lb, width, x0, x1, 5, &in)
		if below != wantBelow || nk != len(wantIn) {
			t.Fatalf("case %d: below %d kept %d, want %d and %d", it, below, nk, wantBelow, len(wantIn))
		}
		for k := range wantIn {
			if in[k] != wantIn[k] {
				t.Fatalf("case %d: kept[%d] = %d, want %d", it, k, in[k], wantIn[k])
			}
		}
	}
}

// BenchmarkCountBelow counts one chunk of draws (the inner loop of a
// resume's count).
func BenchmarkCountBelow(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	var u [countChunk]float64
	for k := range u {
		u[k] = r.Float64()
	}
	var in [countChunk]int32
	var s int64
	for b.Loop() {
		n, _ := countBelow(u[:], 1<<20, -1e6, 2e6, 1<<20, 1<<20+100, 0, &in)
		s += n
	}
	_ = s
}

// TestSortKept compares sortKept, and selectKept's rank ranges, with a
// comparison sort by (position, j), with many equal positions, clustered
// positions and ranges at the edge of float precision.
func TestSortKept(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	for it := range 400 {
		n := r.IntN(3000)
		x0 := r.Float64() * 1e7
		w := []float64{1e-9, 1, 3, 1e4, 1e6}[it%5]
		x1 := x0 + w
		kept := make([]jPos, n)
		for k := range kept {
			var p float64
			switch it % 3 {
			case 0:
				p = x0 + r.Float64()*w
			case 1:
				p = x0 + float64(r.IntN(5))*w/5 // ties
			default:
				p = x0 + w*r.Float64()*r.Float64()*r.Float64() // clustered
			}
			if p >= x1 {
				p = x0
			}
			kept[k] = jPos{p, int64(k)}
		}
		want := slices.Clone(kept)
		slices.SortFunc(want, func(u, v jPos) int {
			if u.p != v.p {
				return cmp.Compare(u.p, v.p)
			}
			return cmp.Compare(u.j, v.j)
		})
		orig := slices.Clone(kept)
		for range 4 {
			a := r.IntN(n + 1)
			b := a + r.IntN(min(n-a, 1+r.IntN(600))+1)
			if got := selectKept(kept, x0, x1, a, b); !slices.Equal(got, want[a:b]) {
				t.Fatalf("case %d (n=%d, width %g): selectKept ranks [%d, %d) differ", it, n, w, a, b)
			}
			if !slices.Equal(kept, orig) {
				t.Fatalf("case %d: selectKept modified its input", it)
			}
		}
		if got := sortKept(kept, x0, x1); !slices.Equal(got, want) {
			t.Fatalf("case %d (n=%d, width %g): order differs", it, n, w)
		}
	}
}

// TestSelectGuess: selectGuess, when it answers, gives sortKept's ranks
// [a, b) exactly, on positions spread evenly, with ties, crowded towards
// x0 or x1 (where the guess misses and it must decline or still be
// exact), and for ranks at the ends; and it does answer for a resume's evenly spread 20k
// entries (else selectKept would always take the two passes).
func TestSelectGuess(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 3))
	answered, even := 0, 0
	for it := range 240 {
		n := 1024 + r.IntN(24000)
		x0 := r.Float64() * 1e7
		w := float64(n) * []float64{1, 0.5, 3}[it%3]
		x1 := x0 + w
		kept := make([]jPos, n)
		for k := range kept {
			var p float64
			switch it % 5 {
			case 0, 1:
				p = x0 + r.Float64()*w
			case 2:
				p = x0 + float64(r.IntN(n/3))*w/float64(n/3) // ties
			case 3:
				p = x0 + w*r.Float64()*r.Float64() // clustered near x0
			default:
				p = x1 - w*r.Float64()*r.Float64() // near x1
			}
			kept[k] = jPos{min(p, math.Nextafter(x1, x0)), int64(k)}
		}
		want := slices.Clone(kept)
		slices.SortFunc(want, func(u, v jPos) int {
			if u.p != v.p {
				return cmp.Compare(u.p, v.p)
			}
			return cmp.Compare(u.j, v.j)
		})
		for range 4 {
			k := 1 + r.IntN(min(2048, n))
			a := r.IntN(n - k + 1)
			if r.IntN(4) == 0 {
				a = []int{0, n - k}[r.IntN(2)] // the ends
			}
			b := a + k
			got, ok := selectGuess(kept, x0, x1, a, b)
			if ok && !slices.Equal(got, want[a:b]) {
				t.Fatalf("case %d (n=%d, kind %d): selectGuess ranks [%d, %d) differ", it, n, it%5, a, b)
			}
			if it%5 < 2 && b-a <= n/8 {
				even++
				answered += b2i(ok)
			}
		}
	}
	if answered*10 < even*9 {
		t.Fatalf("selectGuess answered %d of %d requests on evenly spread positions", answered, even)
	}
}

// BenchmarkSortKept sorts what a resume's count keeps (about 20k entries
// over as many positions).
func BenchmarkSortKept(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	src := make([]jPos, 20000)
	for k := range src {
		src[k] = jPos{5e6 + r.Float64()*20000, int64(k)}
	}
	kept := make([]jPos, len(src))
	b.ReportAllocs()
	for b.Loop() {
		copy(kept, src)
		sortKept(kept, 5e6, 5e6+20000)
	}
}

// BenchmarkSelectKept selects a batch and a whole resume request (the
// ranks of 8 ranks × 8 workers' first batches) of what a resume's count
// keeps, without sorting the rest.
func BenchmarkSelectKept(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	kept := make([]jPos, 20000)
	for k := range kept {
		kept[k] = jPos{5e6 + r.Float64()*20000, int64(k)}
	}
	for _, n := range []int{32, 2048} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				selectKept(kept, 5e6, 5e6+20000, 9000, 9000+n)
			}
		})
	}
}

// TestCountLineMatchesFloat compares the integer count with the
// floating-point one on random spans, including bounds equal to an input's
// exact position (ties), narrow and huge widths and far indices.
func TestCountLineMatchesFloat(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 2))
	var hits []nprand.LineHit
	fast := 0
	for it := range 3000 {
		g := nprand.New(uint64(r.IntN(1000)))
		if it%2 == 1 {
			g.Uint32()
		}
		n := 1 + r.Int64N(3000)
		jb := r.Int64N(1 << 30)
		if it%5 == 0 {
			jb = r.Int64N(1 << 50)
		}
		width := []float64{0.5, 1, 7.25, 1e3, 4e6, 1e9}[it%6] * (0.5 + r.Float64())
		lb := -r.Float64() * width
		x0 := float64(jb) + lb + r.Float64()*(float64(n)+width)
		x1 := x0 + r.Float64()*float64(n)
		if it%4 == 0 {
			// Bounds on exact positions of inputs of the span.
			u := make([]float64, n)
			h := *g
			h.FillFloat64(u)
			a, b := r.Int64N(n), r.Int64N(n)
			x0 = float64(jb+a) + (lb + float64(width*u[a]))
			x1 = max(x0, float64(jb+b)+(lb+float64(width*u[b])))
		}
		if it%7 == 0 {
			x1 = x0
		}
		wantN, wantKept := countFloat(*g, jb, jb+n, lb, width, x0, x1, nil)
		var gotN int64
		var gotKept []jPos
		gotN, gotKept, hits = countLine(*g, jb, jb+n, lb, width, x0, x1, nil, hits)
		if gotN < 0 {
			continue // out of the integer path's range
		}
		fast++
		if gotN != wantN || !slices.Equal(gotKept, wantKept) {
			t.Fatalf("case %d (jb=%d n=%d lb=%g width=%g x0=%g x1=%g): below %d, %d kept; want %d, %d",
				it, jb, n, lb, width, x0, x1, gotN, len(gotKept), wantN, len(wantKept))
		}
	}
	if fast < 1500 {
		t.Fatalf("only %d of 3000 cases took the integer path", fast)
	}
}
