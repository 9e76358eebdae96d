package cli

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestStreamNoIndex streams the images fixture (3 shards, 40 samples each)
// with --no-index on 3 ranks × 1 worker and 1 rank × 2 workers: together
// the ranks read every sample once; a run stopped by --limit resumes from
// its --save-state to exactly the rest, and a state is refused on another
// worker count.
func TestStreamNoIndex(t *testing.T) {
	data := filepath.Join(wdsFixtureDir(t), "images", "data", "shard-{000000..000002}.tar")
	run := func(args ...string) map[string]any {
		t.Helper()
		out, err := runCLI(t, append([]string{"stream", "--no-index", "--json", "--progress", "none"}, append(args, data)...)...)
		if err != nil {
			t.Fatalf("sluice stream %s: %v", strings.Join(args, " "), err)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(out), &m); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		return m
	}
	total := 0.0
	for r := range 3 {
		m := run("--shuffle", "--nodes", "3", "--ranks-per-node", "1", "--rank", fmt.Sprint(r))
		if m["samples"].(float64) != 40 || m["shards"].(float64) != 1 {
			t.Errorf("rank %d of 3: %v samples from %v shards, want 40 from 1", r, m["samples"], m["shards"])
		}
		total += m["samples"].(float64)
	}
	if total != 120 {
		t.Errorf("3 ranks read %v samples, want 120", total)
	}
	st := filepath.Join(t.TempDir(), "state.json")
	m := run("--workers-per-rank", "2", "--batch-size", "4", "--limit", "50", "--save-state", st)
	if m["samples"].(float64) != 50 {
		t.Fatalf("--limit 50 read %v samples", m["samples"])
	}
	m = run("--workers-per-rank", "2", "--batch-size", "4", "--resume", st)
	if m["samples"].(float64) != 70 {
		t.Errorf("resumed run read %v samples, want the 70 left", m["samples"])
	}
	if _, err := runCLI(t, "stream", "--no-index", "--json", "--progress", "none", "--resume", st, data); err == nil ||
		!strings.Contains(err.Error(), "2 workers, this run 1") {
		t.Errorf("resume on 1 worker of a 2-worker state: %v", err)
	}
}
