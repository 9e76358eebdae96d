package nprand_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicedata/sluice/internal/cputime"
	"github.com/sluicedata/sluice/nprand"
)

// Vectors of spec Appendix A.6 (numpy 1.24.2).
func TestSeedSequence(t *testing.T) {
	tests := []struct {
		seed    uint64
		pool    [4]uint32
		words   [4]uint64 // zero when the spec gives none
		state   [2]uint64
		inc     [2]uint64
		next64s [3]uint64
	}{
		{
			seed:    0,
			pool:    [4]uint32{0xfe40eb07, 0x4f363a36, 0x4eb2009d, 0xc89a7aa7},
			words:   [4]uint64{0xdb2cd7e7b0f478be, 0xabf4641a2c71ba49, 0x20c6ed6d9d7b8d41, 0x2c4099de223c39d4},
			state:   [2]uint64{0x1aa1b5345996452d, 0x09585eb7a69561e3},
			inc:     [2]uint64{0x418ddadb3af71a82, 0x588133bc447873a9},
			next64s: [3]uint64{0xa30febcfd9c2825f, 0x4510bdf882d9d721, 0x0a7d3da94ecde8b8},
		},
		{
			seed:    9176,
			pool:    [4]uint32{0x199e1e93, 0xe6d2e252, 0xa3e5793f, 0x286e4325},
			words:   [4]uint64{0x843c62eb0dd64448, 0xfd951d81e345305f, 0x81ddf06a9fa2424c, 0x015c41789371fd9b},
			state:   [2]uint64{0xf1ef16c822beaeb8, 0xbac9a92f5966dea5},
			inc:     [2]uint64{0x03bbe0d53f448498, 0x02b882f126e3fb37},
			next64s: [3]uint64{0xce488e5ff4c10304, 0x233a25e3fe3960b0, 0xbc04ca4c34b5a59c},
		},
		{
			seed:    1<<32 + 1,
			pool:    [4]uint32{0x4fa8819f, 0x4eda2000, 0xe3ba519d, 0x1625ba6f},
			next64s: [3]uint64{0x54f596cd84cf4c1f, 0x9ca536eb5cb7fa6a, 0x81f436c89e9256f8},
		},
	}
	for _, tc := range tests {
		t.Run(strconv.FormatUint(tc.seed, 10), func(t *testing.T) {
			words, pool := nprand.SeedWords(tc.seed)
			if pool != tc.pool {
				t.Errorf("pool = %08x, want %08x", pool, tc.pool)
			}
			if tc.words != [4]uint64{} && words != tc.words {
				t.Errorf("words = %016x, want %016x", words, tc.words)
			}
			g := nprand.New(tc.seed)
			sh, sl, ih, il := g.State()
			if tc.state != [2]uint64{} && ([2]uint64{sh, sl} != tc.state || [2]uint64{ih, il} != tc.inc) {
				t.Errorf("state/inc = %016x%016x / %016x%016x, want %016x%016x / %016x%016x",
					sh, sl, ih, il, tc.state[0], tc.state[1], tc.inc[0], tc.inc[1])
			}
			var got [3]uint64
			for i := range got {
				got[i] = g.Uint64()
			}
			if got != tc.next64s {
				t.Errorf("next64 = %016x, want %016x", got, tc.next64s)
			}
		})
	}
}

func TestSpecVectors(t *testing.T) {
	check := func(t *testing.T, name string, got, want any) {
		t.Helper()
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%s mismatch (-want +got):\n%s", name, d)
		}
	}
	check(t, "default_rng(9176).permutation(10)", nprand.New(9176).Permutation(10), []int64{8, 1, 2, 7, 5, 6, 9, 3, 0, 4})
	check(t, "default_rng(0).permutation(5)", nprand.New(0).Permutation(5), []int64{2, 4, 3, 0, 1})
	ints, err := nprand.New(0).Integers(0, 10, 5)
	if err != nil {
		t.Fatal(err)
	}
	check(t, "default_rng(0).integers(0,10,5)", ints, []int64{8, 6, 5, 2, 3})
	g := nprand.New(9176)
	a, _ := g.Integer(196608, 327680)
	b, _ := g.Integer(196608, 327680)
	check(t, "integers(196608,327680) x2", []int64{a, b}, []int64{321922, 302225})
	u, _ := nprand.New(0).Uniforms(0, 1, 2)
	check(t, "default_rng(0).uniform(0,1,2)", u, []float64{0.6369616873214543, 0.2697867137638703})
	u, _ = nprand.New(9176).Uniforms(-2.5, 3.0, 3)
	check(t, "default_rng(9176).uniform(-2.5,3,3)", u, []float64{1.931870404574644, -1.743166899783107, 1.5394645117065942})
	c, _ := nprand.New(0).Choice(10, 3)
	check(t, "default_rng(0).choice(10,3)", c, []int64{5, 9, 6})
	c, _ = nprand.New(9176).Choice(20000, 500)
	check(t, "default_rng(9176).choice(20000,500)[:5]", c[:5], []int64{18955, 9120, 3174, 448, 11717})
}

type fixtureOp struct {
	Op     string          `json:"op"`
	Result json.RawMessage `json:"result"`
	Bits   []string        `json:"bits"`
}

type fixtureCase struct {
	Seed          uint64      `json:"seed"`
	Sequence      []fixtureOp `json:"sequence"`
	FreshSequence []fixtureOp `json:"fresh_sequence"`
}

func loadFixture(t *testing.T) []fixtureCase {
	t.Helper()
	b, err := os.ReadFile("testdata/numpy_rng.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Cases []fixtureCase `json:"cases"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("testdata/numpy_rng.json: %v", err)
	}
	if len(f.Cases) == 0 {
		t.Fatal("testdata/numpy_rng.json: no cases")
	}
	return f.Cases
}

func ints(t *testing.T, raw json.RawMessage) []int64 {
	t.Helper()
	var v []int64
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func arange(n int) []int64 {
	x := make([]int64, n)
	for i := range x {
		x[i] = int64(i)
	}
	return x
}

// TestFixture replays every call sequence of numpy_rng.json on one generator
// per seed (the 32-bit buffer carries across calls, as in numpy).
func TestFixture(t *testing.T) {
	for _, c := range loadFixture(t) {
		t.Run(strconv.FormatUint(c.Seed, 10), func(t *testing.T) {
			g := nprand.New(c.Seed)
			for _, op := range c.Sequence {
				var got, want any
				if op.Bits == nil {
					want = ints(t, op.Result)
				}
				switch op.Op {
				case "shuffle(arange(20))":
					x := arange(20)
					g.ShuffleInt64(x)
					got = x
				case "shuffle(arange(1000))":
					x := arange(1000)
					g.ShuffleInt64(x)
					got = x
				case "integers(0, 196608, size=8)":
					got, _ = g.Integers(0, 196608, 8)
				case "integers(196608, 327680) x4 scalar calls":
					var v []int64
					for range 4 {
						x, err := g.Integer(196608, 327680)
						if err != nil {
							t.Fatal(err)
						}
						v = append(v, x)
					}
					got = v
				case "uniform(low=-5.5, high=7.25, size=6)":
					u, err := g.Uniforms(-5.5, 7.25, 6)
					if err != nil {
						t.Fatal(err)
					}
					var bitsGot []string
					for _, f := range u {
						bitsGot = append(bitsGot, fmt.Sprintf("%016x", math.Float64bits(f)))
					}
					got, want = bitsGot, op.Bits
				default:
					t.Fatalf("unknown op %q", op.Op)
				}
				if d := cmp.Diff(want, got); d != "" {
					t.Fatalf("%s (-want +got):\n%s", op.Op, d)
				}
			}
			g = nprand.New(c.Seed)
			for _, op := range c.FreshSequence {
				var got []int64
				switch op.Op {
				case "permutation(50)":
					got = g.Permutation(50)
				case "choice(30, 10, replace=False)":
					var err error
					if got, err = g.Choice(30, 10); err != nil {
						t.Fatal(err)
					}
				default:
					t.Fatalf("unknown op %q", op.Op)
				}
				if d := cmp.Diff(ints(t, op.Result), got); d != "" {
					t.Fatalf("%s (-want +got):\n%s", op.Op, d)
				}
			}
		})
	}
}

func TestAdvance(t *testing.T) {
	for _, n := range []uint64{0, 1, 2, 3, 7, 64, 1000, 12345} {
		a, b := nprand.New(42), nprand.New(42)
		for range n {
			a.Uint64()
		}
		b.Advance(n)
		if x, y := a.Uint64(), b.Uint64(); x != y {
			t.Errorf("Advance(%d): next draw %x, want %x", n, y, x)
		}
	}
}

func TestSkipShuffle(t *testing.T) {
	sizes := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 17, 33, 64, 65, 1000, 4096, 4097, 65537, 70000}
	for seed := range uint64(20) {
		for _, n := range sizes {
			for pre := range 2 { // pre = 1 starts with a buffered 32-bit half
				a, b := nprand.New(seed), nprand.New(seed)
				for range pre {
					a.Uint32()
					b.Uint32()
				}
				a.ShuffleInt64(arange(n))
				b.SkipShuffle(n)
				// Compare through 32-bit draws so the buffered half is
				// compared too.
				for i := range 3 {
					if x, y := a.Uint32(), b.Uint32(); x != y {
						t.Fatalf("seed %d n=%d pre=%d draw %d: skip gives %x, shuffle gives %x", seed, n, pre, i, y, x)
					}
				}
			}
		}
	}
}

// TestShuffleVariantsAgree checks the fast slice shuffles against the
// callback Shuffle (a plain loop over Interval), including the generator
// state they leave behind.
func TestShuffleVariantsAgree(t *testing.T) {
	for seed := range uint64(10) {
		for _, n := range []int{0, 1, 2, 3, 5, 16, 17, 300, 5000} {
			for pre := range 2 {
				g1, g2, g3 := nprand.New(seed), nprand.New(seed), nprand.New(seed)
				for range pre {
					g1.Uint32()
					g2.Uint32()
					g3.Uint32()
				}
				a := arange(n)
				g1.ShuffleInt64(a)
				b := make([]int32, n)
				for i := range b {
					b[i] = int32(i)
				}
				g2.ShuffleInt32(b)
				c := arange(n)
				g3.Shuffle(len(c), func(i, j int) { c[i], c[j] = c[j], c[i] })
				for i := range a {
					if a[i] != int64(b[i]) || a[i] != c[i] {
						t.Fatalf("seed %d n=%d pre=%d index %d: int64 %d, int32 %d, callback %d", seed, n, pre, i, a[i], b[i], c[i])
					}
				}
				if x, y, z := g1.Uint32(), g2.Uint32(), g3.Uint32(); x != z || y != z {
					t.Fatalf("seed %d n=%d pre=%d: next draws %x %x, want %x", seed, n, pre, x, y, z)
				}
			}
		}
	}
}

func TestBoundedRange(t *testing.T) {
	g := nprand.New(1)
	for _, rng := range []uint64{1, 2, 3, 1000, 0xfffffffe, 0xffffffff, 1 << 40, 1<<63 + 5} {
		for range 200 {
			if v := g.Bounded(rng); v > rng {
				t.Fatalf("Bounded(%d) = %d", rng, v)
			}
			if v := g.Interval(rng); v > rng {
				t.Fatalf("Interval(%d) = %d", rng, v)
			}
		}
	}
	if g.Bounded(0) != 0 || g.Interval(0) != 0 {
		t.Fatal("zero range must give 0")
	}
}

func TestChoiceTailDistinct(t *testing.T) {
	got, err := nprand.New(3).Choice(20000, 20000)
	if err != nil {
		t.Fatal(err)
	}
	seen := make([]bool, 20000)
	for _, v := range got {
		if seen[v] {
			t.Fatalf("duplicate %d", v)
		}
		seen[v] = true
	}
}

func TestErrors(t *testing.T) {
	g := nprand.New(0)
	if _, err := g.Integer(5, 5); !errors.Is(err, nprand.ErrInvalidArgument) {
		t.Errorf("Integer(5,5) error = %v", err)
	}
	if _, err := g.Integers(0, 10, -1); !errors.Is(err, nprand.ErrInvalidArgument) {
		t.Errorf("Integers size -1 error = %v", err)
	}
	if _, err := g.Choice(3, 4); !errors.Is(err, nprand.ErrInvalidArgument) {
		t.Errorf("Choice(3,4) error = %v", err)
	}
	if _, err := g.Uniforms(0, math.Inf(1), 1); !errors.Is(err, nprand.ErrInvalidArgument) {
		t.Errorf("Uniforms(0,inf) error = %v", err)
	}
	if c, err := g.Choice(5, 0); err != nil || len(c) != 0 {
		t.Errorf("Choice(5,0) = %v, %v", c, err)
	}
}

func ExampleGenerator_Permutation() {
	g := nprand.New(9176) // numpy.random.default_rng(9176)
	fmt.Println(g.Permutation(10))
	// Output: [8 1 2 7 5 6 9 3 0 4]
}

func ExampleGenerator_Integer() {
	g := nprand.New(9176)
	a, _ := g.Integer(196608, 327680)
	b, _ := g.Integer(196608, 327680)
	fmt.Println(a, b)
	// Output: 321922 302225
}

func BenchmarkUint64(b *testing.B) {
	g := nprand.New(1)
	var s uint64
	for b.Loop() {
		s += g.Uint64()
	}
	_ = s
}

func BenchmarkShuffle1M(b *testing.B) {
	x := arange(1 << 20)
	b.ReportAllocs()
	b.SetBytes(8 << 20)
	g := nprand.New(1)
	for b.Loop() {
		g.ShuffleInt64(x)
	}
}

func BenchmarkSkipShuffle1M(b *testing.B) {
	g := nprand.New(1)
	cpu := cputime.Process()
	for b.Loop() {
		g.SkipShuffle(1 << 20)
	}
	reportCPU(b, cpu)
}

// BenchmarkShuffleSpan shuffles a 4096-element span (an MDS shard of small
// samples; cache-resident, so the generator dominates).
func BenchmarkShuffleSpan(b *testing.B) {
	x := arange(4096)
	g := nprand.New(1)
	for b.Loop() {
		g.ShuffleInt64(x)
	}
}

// TestAdvanceJump: a precomputed jump moves a generator as Advance does,
// on its own stream and (recomputing) on another.
func TestAdvanceJump(t *testing.T) {
	for _, n := range []uint64{0, 1, 2, 3, 4095, 4096, 1 << 40, 1<<64 - 1} {
		g := nprand.New(n ^ 99)
		j := g.JumpOf(n)
		for range 3 {
			a, b := *g, *g
			a.Advance(n)
			b.AdvanceJump(&j)
			if a != b {
				t.Fatalf("n=%d: jump left %+v, Advance %+v", n, b, a)
			}
			g.Uint64()
		}
		h := nprand.New(n + 12345)
		a, b := *h, *h
		a.Advance(n)
		b.AdvanceJump(&j)
		if a != b {
			t.Fatalf("n=%d, other stream: jump left %+v, Advance %+v", n, b, a)
		}
	}
}

// BenchmarkSkipShuffles skips the shuffles of 256 spans of 4096 samples
// (a 1M-sample node of a py1e epoch), one SkipShuffle after the other
// and with SkipShuffles.
func BenchmarkSkipShuffles(b *testing.B) {
	const spans, size = 256, 4096
	b.Run("each", func(b *testing.B) {
		g := nprand.New(1)
		cpu := cputime.Process()
		for b.Loop() {
			for range spans {
				g.SkipShuffle(size)
			}
		}
		reportCPU(b, cpu)
	})
	b.Run("runs", func(b *testing.B) {
		g := nprand.New(1)
		cpu := cputime.Process()
		for b.Loop() {
			g.SkipShuffles(spans, func(int) int { return size }, func(int, nprand.Generator) {})
		}
		reportCPU(b, cpu)
	})
}
