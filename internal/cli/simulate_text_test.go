package cli

import (
	"strings"
	"testing"
)

// TestSimulateTextBytes checks the readable report's byte counts in
// units that fit the run: a 102 kB dataset read as "0.0 GB" and
// "0.00 GB" before, and the smallest cache limit as "0.000 GB".
func TestSimulateTextBytes(t *testing.T) {
	out, err := runCLI(t, "simulate", "--shards", "4", "--samples", "100", "--batch-size", "2",
		"--step-time", "1s", "--search-min-cache")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"4 shards, 100 samples, 102 kB stored",
		"104 kB in 5 requests from the store, peak cache 104 kB per node", // the index (1.6 kB) and the shards
		"smallest cache limit with no stall: 104 kB (104000 bytes;",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "0.00 GB") || strings.Contains(out, "0.0 GB") {
		t.Errorf("a small run's figures in GB:\n%s", out)
	}
	for n, want := range map[int64]string{0: "0 B", 999: "999 B", 1000: "1.00 kB", 99949: "99.9 kB", 999_499: "999 kB",
		999_500: "1.00 MB", 3_649_644_867: "3.65 GB", 1 << 62: "4.61 EB"} {
		if got := fmtSimBytes(n); got != want {
			t.Errorf("fmtSimBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
