package split

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluicedata/sluice/format"
)

// TestAppendPyFloat compares the allocation-free repr with the format
// package's, on fixed and random values.
func TestAppendPyFloat(t *testing.T) {
	fixed := map[float64]string{
		1: "1.0", 0.1: "0.1", 1e-05: "1e-05", 1e16: "1e+16", 123456789: "123456789.0", 0.0001: "0.0001",
		0: "0.0", 1.2345678901234568e+16: "1.2345678901234568e+16", 1e22: "1e+22", 5e-324: "5e-324",
		1e100: "1e+100", -2.5: "-2.5", 9999999999999998: "9999999999999998.0",
	}
	for x, want := range fixed {
		if got := string(AppendPyFloat(nil, x)); got != want {
			t.Errorf("AppendPyFloat(%v) = %q, want %q", x, got, want)
		}
	}
	if got := string(AppendPyFloat(nil, math.Copysign(0, -1))); got != "-0.0" {
		t.Errorf("-0: %q", got)
	}
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 200000; i++ {
		var x float64
		switch i % 3 {
		case 0:
			x = math.Float64frombits(r.Uint64())
		case 1:
			x = r.NormFloat64() * math.Pow(10, float64(r.IntN(44)-22))
		default:
			x = float64(r.IntN(1 << 20))
		}
		if got, want := string(AppendPyFloat(nil, x)), format.FormatPyFloat(x); got != want {
			t.Fatalf("AppendPyFloat(%b) = %q, format says %q", x, got, want)
		}
		if got, want := string(AppendJSONFloat(nil, x)), string(format.AppendJSONFloat(nil, x)); got != want {
			t.Fatalf("AppendJSONFloat(%b) = %q, format says %q", x, got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { AppendPyFloat(make([]byte, 0, 32), 1.2345e-7) }); n > 1 {
		t.Errorf("%v allocations", n)
	}
}
