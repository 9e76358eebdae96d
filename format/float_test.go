package format_test

import (
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicedata/sluice/format"
)

// reprOracle is Python's repr(float) spelled with strconv's shortest
// formats: positional for -4 <= exp < 16 (with ".0" for integers), else
// scientific with a two-digit exponent, which Go's 'e' format already is.
func reprOracle(x float64) string {
	switch {
	case math.IsNaN(x):
		return "nan"
	case math.IsInf(x, 0):
		return strings.TrimPrefix(strconv.FormatFloat(x, 'f', -1, 64), "+")
	}
	e := strconv.FormatFloat(x, 'e', -1, 64)
	exp, _ := strconv.Atoi(e[strings.IndexByte(e, 'e')+1:])
	if exp < -4 || exp >= 16 {
		return e
	}
	f := strconv.FormatFloat(x, 'f', -1, 64)
	if !strings.Contains(f, ".") {
		f += ".0"
	}
	return f
}

// TestAppendPyFloat checks the repr on fixed values and against an
// independent construction on random ones, and that it does not allocate.
func TestAppendPyFloat(t *testing.T) {
	fixed := map[float64]string{
		1: "1.0", 0.1: "0.1", 1e-05: "1e-05", 1e16: "1e+16", 123456789: "123456789.0", 0.0001: "0.0001",
		0: "0.0", 1.2345678901234568e+16: "1.2345678901234568e+16", 1e22: "1e+22", 5e-324: "5e-324",
		1e100: "1e+100", -2.5: "-2.5", 9999999999999998: "9999999999999998.0",
		math.Inf(1): "inf", math.Inf(-1): "-inf",
	}
	for x, want := range fixed {
		if got := string(format.AppendPyFloat(nil, x, 64)); got != want {
			t.Errorf("AppendPyFloat(%v) = %q, want %q", x, got, want)
		}
	}
	if got := format.FormatPyFloat(math.Copysign(0, -1)); got != "-0.0" {
		t.Errorf("-0: %q", got)
	}
	if got := format.FormatPyFloat(math.NaN()); got != "nan" {
		t.Errorf("NaN: %q", got)
	}
	// float32 values print with their own shortest digits, as numpy does.
	if got := string(format.AppendPyFloat(nil, float64(float32(0.1)), 32)); got != "0.1" {
		t.Errorf("float32 0.1: %q", got)
	}
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 100000; i++ {
		var x float64
		switch i % 3 {
		case 0:
			x = math.Float64frombits(r.Uint64())
		case 1:
			x = r.NormFloat64() * math.Pow(10, float64(r.IntN(44)-22))
		default:
			x = float64(r.IntN(1 << 20))
		}
		if got, want := string(format.AppendPyFloat(nil, x, 64)), reprOracle(x); got != want {
			t.Fatalf("AppendPyFloat(%b) = %q, want %q", x, got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { format.AppendPyFloat(make([]byte, 0, 32), 1.2345e-7, 64) }); n > 1 {
		t.Errorf("%v allocations", n)
	}
}

// TestFormatFloat16 checks numpy's float16 repr on a few values.
func TestFormatFloat16(t *testing.T) {
	for _, c := range []struct {
		x    float64
		want string
	}{
		{0.1, "0.1"}, {65504, "65500.0"}, {1.0 / 3, "0.3333"}, {-2, "-2.0"}, {1e-4, "0.0001"},
		{5.960464477539063e-08, "6e-08"}, {0, "0.0"},
	} {
		if got := format.FormatFloat16(format.Float16From(c.x)); got != c.want {
			t.Errorf("FormatFloat16(%v) = %q, want %q", c.x, got, c.want)
		}
	}
}
