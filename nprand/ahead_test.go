package nprand

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestLCGDistance checks lcgDistance against Advance: random states and
// distances (short, long, past 2^64), and a state's distance to itself.
func TestLCGDistance(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for trial := range 400 {
		g := New(r.Uint64())
		g.state = u128{r.Uint64(), r.Uint64()}
		var want u128
		switch trial % 4 {
		case 0:
			want.lo = uint64(r.IntN(100))
		case 1:
			want.lo = r.Uint64() >> 20
		case 2:
			want.lo = r.Uint64()
		case 3:
			want = u128{r.Uint64(), r.Uint64()}
		}
		h := *g
		h.Advance(want.lo)
		if want.hi != 0 {
			// 2^64·hi more steps: Advance(2^63) twice per unit of hi.
			for range 2 {
				j := Generator{state: h.state, inc: h.inc}
				j.Advance(1 << 63)
				h.state = j.state
			}
			want.hi = 1
		}
		if got := lcgDistance(g.state, h.state, g.inc); got != want {
			t.Fatalf("trial %d: distance %#x, want %#x", trial, got, want)
		}
	}
}

// TestAheadCountLine compares Ahead.CountLine with Generator.CountLine
// from the same draw: random runs, positions in them, lines (steep,
// flat, with and without hit regions, lines through the draws' range so
// that many draws are undecided by their top bits), on the vector scan
// and the scalar one. It also checks Index, and that draws not yet made
// are refused.
func TestAheadCountLine(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 9))
	const full = int64(1) << 53
	for trial := range 120 {
		g := New(r.Uint64())
		if trial%3 == 1 {
			g.Uint32() // a buffered half plays no part
		}
		n := 1 + r.IntN(3*aheadChunk)
		a := NewAhead(*g, n)
		if trial%5 == 0 {
			// Partly filled: draws past the first chunk are refused.
			a.n = min(n, aheadChunk)
			a.Fill()
			a.n = n
		} else {
			a.Fill()
		}
		for q := range 40 {
			at := int64(r.IntN(n))
			m := r.IntN(n - int(at) + 1)
			if q%4 == 0 {
				m = min(m, 40)
			}
			step := r.Int64N(full/int64(max(m, 1))+1) - full/int64(4*max(m, 1))
			k0 := r.Int64N(2*full) - full/2
			var lo, hi int64
			switch q % 4 {
			case 1:
				lo, hi = 1<<20, 1<<20
			case 2:
				lo, hi = r.Int64N(full/64), r.Int64N(full/64)
			case 3:
				lo, hi = full, full // every draw a hit
			}
			h := *g
			h.Advance(uint64(at))
			if idx, ok := a.Index(h); !ok || idx != at {
				t.Fatalf("trial %d: Index %d %v, want %d", trial, idx, ok, at)
			}
			wb, wh := h.CountLine(m, k0, step, lo, hi, nil)
			for _, vec := range []bool{true, false} {
				var gb int
				var gh []LineHit
				var ok bool
				if vec {
					gb, gh, ok = a.CountLine(at, m, k0, step, lo, hi, []LineHit{{-1, 0}})
					gh = gh[1:]
				} else {
					gb, gh, ok = a.countLineWith(countTopScalar, at, m, k0, step, lo, hi, nil)
				}
				if filled := int64(a.Filled()); at+int64(m) > filled && m > 0 {
					if ok {
						t.Fatalf("trial %d: draws [%d, %d) counted with %d made", trial, at, at+int64(m), filled)
					}
					continue
				}
				if !ok || gb != wb || !slices.Equal(gh, wh) {
					t.Fatalf("trial %d/%d (vector %v, at=%d n=%d k0=%d step=%d lo=%d hi=%d): %d below, %d hits (ok %v); want %d, %d",
						trial, q, vec, at, m, k0, step, lo, hi, gb, len(gh), ok, wb, len(wh))
				}
			}
		}
	}
}

// TestAheadIndex: a generator before the run's start has a negative
// index; one of another stream, or 2^63 steps or more away, none.
func TestAheadIndex(t *testing.T) {
	g := New(1)
	h := *g
	h.Advance(5)
	a := NewAhead(h, 10)
	if d, ok := a.Index(*g); !ok || d != -5 {
		t.Fatalf("5 draws before the start: index %d %v, want -5", d, ok)
	}
	if _, ok := a.Index(*New(2)); ok {
		t.Fatal("a generator of another stream has an index")
	}
	b := h
	b.Advance(1 << 63)
	if _, ok := a.Index(b); ok {
		t.Fatal("a generator 2^63 draws on has an index")
	}
	if d, ok := a.Index(h); !ok || d != 0 {
		t.Fatalf("the start: index %d %v, want 0", d, ok)
	}
}

// BenchmarkAhead measures what a py1e resume's count does with and
// without draws made ahead, per 4,096-draw span against a line as the
// resume's (a 4M-position shift window: step 2^31; a hit region of 8k
// positions): Generator.CountLine, which makes the draws, against
// Ahead.CountLine on draws made by Fill; and Fill itself (per draw).
func BenchmarkAhead(b *testing.B) {
	const n, span = 1 << 20, 4096
	g := New(3)
	a := NewAhead(*g, n)
	a.Fill()
	step := int64(1) << 31
	k0 := int64(span/2) * step
	lo, hi := int64(1)<<21, int64(8192)<<31
	b.Run("generate", func(b *testing.B) {
		h := *g
		for b.Loop() {
			h.CountLine(span, k0, step, lo, hi, nil)
		}
	})
	b.Run("ahead", func(b *testing.B) {
		var hits []LineHit
		at := int64(0)
		for b.Loop() {
			_, hits, _ = a.CountLine(at, span, k0, step, lo, hi, hits[:0])
			at = (at + span) % (n - span)
		}
	})
	b.Run("fill-4096", func(b *testing.B) {
		c := NewAhead(*g, n)
		c.top, c.ck = make([]uint16, n), make([]u128, n/aheadEvery)
		for b.Loop() {
			c.fillFrom(0, span)
		}
	})
}

// TestStepsTo: the steps between two generators of a stream, up to a
// bound; -1 past it, backwards, or on another stream.
func TestStepsTo(t *testing.T) {
	g := New(4)
	for d := range 12 {
		h := *g
		h.Advance(uint64(d))
		want := d
		if d > 8 {
			want = -1
		}
		if got := g.StepsTo(h, 8); got != want {
			t.Fatalf("%d steps on: StepsTo %d, want %d", d, got, want)
		}
		if d > 0 {
			if got := h.StepsTo(*g, 8); got != -1 {
				t.Fatalf("%d steps back: StepsTo %d, want -1", d, got)
			}
		}
	}
	if got := g.StepsTo(*New(5), 8); got != -1 {
		t.Fatalf("another stream: StepsTo %d, want -1", got)
	}
}
