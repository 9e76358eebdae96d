package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchPlotQuickstart runs `sluice bench --plot` on the quickstart
// dataset: cold, warm and the baseline, their CSV files and the charts.
func TestBenchPlotQuickstart(t *testing.T) {
	dir := t.TempDir()
	if _, err := runCLI(t, "quickstart", "--dir", dir, "--keep", "--size", "2mb"); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "bench")
	got, err := runCLI(t, "bench", filepath.Join(dir, "remote"), "--out", out, "--batch-size", "8",
		"--step-time", "1ms", "--shuffle", "--workers-per-rank", "2", "--baseline", "--plot", "--no-gpu", "--max-steps", "40")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"cold:", "warm:", "baseline:", "summary.csv", "steps.csv", "throughput.png", "input_wait.png", "input_wait_distribution.png"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	b, err := os.ReadFile(filepath.Join(out, "summary.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(string(b)), "\n"); len(lines) != 4 || !strings.HasPrefix(lines[1], "cold,320,40,") {
		t.Errorf("summary.csv:\n%s", b)
	}
	if _, err := runCLI(t, "plot", out, "--format", "svg"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(out, "throughput.svg")); err != nil {
		t.Error(err)
	}
	if _, err := runCLI(t, "plot", t.TempDir()); err == nil {
		t.Error("plot of an empty directory: no error")
	}
	// The deprecated names still set the same settings.
	for _, flag := range []string{"--plot-format", "--format"} {
		if _, err := runCLI(t, "bench", filepath.Join(dir, "remote"), "--out", out, "--workers", "2", flag, "gif"); err == nil {
			t.Errorf("%s gif accepted", flag)
		}
	}
}

// TestBenchRefusesBadFlags wants each bad flag named in the error, before
// anything runs (before: "stream: bad byte count" without the flag, and
// --plot-format called --format).
func TestBenchRefusesBadFlags(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--batch-size", "8", "--cache-limit", "10 gigs"}, `bench: --cache-limit: stream: bad byte count "10 gigs" (want a number of bytes, or one with a unit`},
		{[]string{"--batch-size", "8", "--plot-format", "gif"}, `bench: --plot-format "gif": want png or svg`},
		{[]string{"--batch-size", "-2"}, "bench: --batch-size -2: must be at least 1"},
		// Only the negative flag is named (before, all three were, as
		// if each were wrong).
		{[]string{"--batch-size", "8", "--workers-per-rank", "-1"}, "bench: --workers-per-rank -1: must not be negative"},
		{[]string{"--batch-size", "8", "--max-steps", "-3"}, "bench: --max-steps -3: must not be negative"},
		{[]string{"--batch-size", "8", "--step-time", "-1s"}, "bench: --step-time -1s: must not be negative"},
	} {
		args := append([]string{"bench", filepath.Join(dir, "no-dataset"), "--out", filepath.Join(dir, "out"), "--no-gpu"}, c.args...)
		out, err := runCLI(t, args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v\n%s\nwant an error saying %q", c.args, err, out, c.want)
		}
	}
}
