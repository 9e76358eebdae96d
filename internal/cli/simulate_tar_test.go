package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestSimulateTarDataset simulates WebDataset tars as sluice plan and
// sluice stream take them: a brace pattern, and a directory of tars
// without index.json (before, simulate read index.json alone: "stat
// DIR/a-{0..1}.tar: no such file or directory").
func TestSimulateTarDataset(t *testing.T) {
	dir := writeTwoTars(t)
	for _, src := range []string{filepath.Join(dir, "a-{0..1}.tar"), dir} {
		out, err := runCLI(t, "simulate", src, "--batch-size", "1", "--json")
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		var r simulateRun
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if r.Report.Samples != 4 || r.Report.Nodes[0].Downloads != 2 {
			t.Errorf("%s: %d samples in %d downloads, want the two tars' 4 in 2", src, r.Report.Samples, r.Report.Nodes[0].Downloads)
		}
	}
	// The tars are indexed in parallel: the error names whichever is
	// found missing first.
	if _, err := runCLI(t, "simulate", filepath.Join(dir, "b-{0..1}.tar"), "--batch-size", "1"); err == nil ||
		!(strings.Contains(err.Error(), "b-0.tar: ") || strings.Contains(err.Error(), "b-1.tar: ")) {
		t.Errorf("missing tars: %v, want an error naming b-0.tar or b-1.tar", err)
	}
}
