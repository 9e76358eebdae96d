package jsonl

import (
	"math"
	"math/big"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicedata/sluice/format"
)

// FuzzFlat compares the flat-object fast path with the general parser:
// whatever the fast path accepts, the general one must decode to the same
// sample.
func FuzzFlat(f *testing.F) {
	for _, s := range []string{
		`{"s": "a", "x": 1}`, `{"s": "b\u00e9\ud83d\ude00\"\\\/\n", "x": -2.5e-3}`, `{}`, ` { "a" : NaN , "b":-Infinity,"c":Infinity} `,
		`{"a": 1e999, "b": 123456789012345678901234567890, "c": -0, "d": true, "e": false, "f": null}`,
		`{"a": [1]}`, `{"a": "\ud800"}`, `{"a": 01}`, `{"a": 1,}`, `{"a" 1}`, `{"a": "x", "a": "y"}`,
	} {
		f.Add([]byte(s))
	}
	opts := cmp.Options{
		cmp.Comparer(func(a, b float64) bool { return a == b && math.Signbit(a) == math.Signbit(b) || a != a && b != b }),
		cmp.Comparer(func(a, b *big.Int) bool { return a.Cmp(b) == 0 }),
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !utf8.Valid(b) {
			return
		}
		fast := format.Sample{}
		if !decodeFlat(b, fast) {
			if len(fast) != 0 {
				t.Fatalf("rejected input left %v", fast)
			}
			return
		}
		slow := format.Sample{}
		if err := decodeGeneral(b, slow); err != nil {
			t.Fatalf("fast path accepted %q, general parser says %v", b, err)
		}
		if diff := cmp.Diff(slow, fast, opts); diff != "" {
			t.Fatalf("%q (-general +fast):\n%s", b, diff)
		}
	})
}
