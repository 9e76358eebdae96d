package sim

import (
	"math/rand/v2"
	"testing"
)

// FuzzParseStepTime: any string parses or fails cleanly, and a parsed
// distribution never draws a negative step.
func FuzzParseStepTime(f *testing.F) {
	for _, s := range []string{"500ms", "normal:500ms,50ms", "uniform:1s,2s", "0.5", "uniform:2s,1s", "normal:", "x:1,2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		st, err := ParseStepTime(s)
		if err != nil {
			return
		}
		r := rand.New(rand.NewPCG(1, 2))
		for range 4 {
			if d := st.Draw(r); d < 0 {
				t.Fatalf("%q drew %s", s, d)
			}
		}
		if _, err := ParseStepTime(st.String()); err != nil {
			t.Fatalf("%q: String %q does not parse: %v", s, st.String(), err)
		}
	})
}
