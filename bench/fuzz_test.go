package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

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

// FuzzPlot: whatever summary.csv and steps.csv hold, Plot returns charts
// or an error naming the file, never panics (a steps.csv with a header
// and no rows made gonum's NominalX index an empty slice; NaN, infinite
// and huge figures failed inside the plotter without naming the row).
func FuzzPlot(f *testing.F) {
	sum := strings.Join(summaryHeader, ",") + "\n"
	steps := strings.Join(stepsHeader, ",") + "\n"
	f.Add(sum+"cold,1,1,1,0,0,0,5,0\n", steps+"cold,0,0,0.001,1\n")
	f.Add(sum+"cold,1,1,1,0,0,0,5,0\n", steps)
	f.Add(sum, steps+"cold,0,0,1,1\n")
	f.Add(sum+"cold,1,1,1,0,0,0,1e308,0\n", steps+"cold,0,1e308,-1e308,1\n")
	f.Add(sum+"cold,1,1,1,0,0,0,NaN,0\n", steps+"x,0,Inf,0,1\n")
	f.Add("config,samples\ncold,abc\n", "")
	f.Fuzz(func(t *testing.T, summary, stepsCSV string) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, SummaryFile), []byte(summary), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, StepsFile), []byte(stepsCSV), 0o644); err != nil {
			t.Fatal(err)
		}
		files, err := Plot(dir, "svg")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "bench: ") {
				t.Fatalf("error %q", err)
			}
			return
		}
		if len(files) < 3 {
			t.Fatalf("charts %v", files)
		}
	})
}
