package nprand_test

import (
	"testing"

	"github.com/sluicedata/sluice/nprand"
)

// TestFillFloat64 checks FillFloat64 against as many Float64 calls, for
// lengths around its four-lane blocks, from a generator holding a
// buffered 32-bit half (which neither touches), and the draws after it.
func TestFillFloat64(t *testing.T) {
	for _, n := range []int{0, 1, 3, 7, 8, 9, 11, 12, 13, 100, 4097} {
		for _, half := range []bool{false, true} {
			a, b := nprand.New(uint64(n)+5), nprand.New(uint64(n)+5)
			if half {
				a.Uint32()
				b.Uint32()
			}
			got := make([]float64, n)
			a.FillFloat64(got)
			for i := range got {
				if w := b.Float64(); w != got[i] {
					t.Fatalf("n=%d half=%v: draw %d is %v, want %v", n, half, i, got[i], w)
				}
			}
			if x, y := a.Uint32(), b.Uint32(); x != y {
				t.Fatalf("n=%d half=%v: next 32-bit draw %x, want %x", n, half, x, y)
			}
			if x, y := a.Uint64(), b.Uint64(); x != y {
				t.Fatalf("n=%d half=%v: next 64-bit draw %x, want %x", n, half, x, y)
			}
		}
	}
}

// BenchmarkFloat64s compares 4,096 Float64 calls with one FillFloat64.
func BenchmarkFloat64s(b *testing.B) {
	d := make([]float64, 4096)
	b.Run("loop", func(b *testing.B) {
		g := nprand.New(1)
		for b.Loop() {
			for i := range d {
				d[i] = g.Float64()
			}
		}
	})
	b.Run("fill", func(b *testing.B) {
		g := nprand.New(1)
		for b.Loop() {
			g.FillFloat64(d)
		}
	})
}
