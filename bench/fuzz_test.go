package bench

import "testing"

// FuzzParseGPULine: nvidia-smi's output is parsed without panics and only
// into sane readings.
func FuzzParseGPULine(f *testing.F) {
	for _, s := range []string{"0, 87, 10240", "[N/A], [N/A], [N/A]", "1, 87 %, 100 MiB", ",,", "9999999999999999999, 1, 1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		s, ok := parseGPULine(line)
		if ok && (s.GPU < 0 || s.Util < 0 || s.Util > 100 || s.MemMiB < 0 || s.MemMiB != s.MemMiB) {
			t.Fatalf("%q parsed to %+v", line, s)
		}
	})
}
