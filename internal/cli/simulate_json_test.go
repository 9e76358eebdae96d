package cli

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
)

// simJSONKeys are the keys of `sluice simulate --json`, per object, as
// docs/input-bound.md lists them: a change to them is a change to what
// scripts read, so it must be made here and in the docs together.
func simJSONKeys() map[string][]string {
	return map[string][]string{
		"run":    {"report", "search", "setting", "simulation_s"},
		"report": {"index_s", "input_wait_fraction", "max_stall_s", "nodes", "peak_cache_bytes", "samples", "samples_per_s", "stall_s", "stalled_steps", "step_samples", "step_starts_s", "step_waits_s", "steps", "store_bytes", "store_requests", "time_to_first_batch_s", "wall_s"},
		"node":   {"cache_hits", "cache_misses", "downloads", "evictions", "input_wait_fraction", "max_stall_s", "node", "peak_cache_bytes", "samples", "samples_per_s", "stall_s", "stalled_steps", "step_waits_s", "store_bytes", "store_requests", "time_to_first_batch_s"},
		"search": {"min_cache_limit", "runs", "stall_free"},
	}
}

// TestSimulateJSONFields pins the fields of `sluice simulate --json`
// (with every optional one present: --vary, --search-min-cache, and the
// per-step arrays --plot keeps) to simJSONKeys, and checks that the
// docs' table names each.
func TestSimulateJSONFields(t *testing.T) {
	out, err := runCLI(t, "simulate", "--shards", "8", "--samples", "400", "--batch-size", "4", "--step-time", "5ms",
		"--latency", "5ms", "--shuffle", "--vary", "cache_limit=none,1mb", "--search-min-cache", "--plot", t.TempDir(), "--json")
	if err != nil {
		t.Fatal(err)
	}
	var top map[string][]map[string]any
	if err := json.Unmarshal([]byte(out), &top); err != nil || len(top) != 1 || len(top["runs"]) != 2 {
		t.Fatalf("--vary --json: want {\"runs\": [2 settings]}: %v\n%s", err, out)
	}
	want := simJSONKeys()
	check := func(what string, obj map[string]any) {
		var got []string
		for k := range obj {
			got = append(got, k)
		}
		slices.Sort(got)
		if !slices.Equal(got, want[what]) {
			t.Errorf("%s keys: %v, want %v (change docs/input-bound.md's table with them)", what, got, want[what])
		}
	}
	for _, run := range top["runs"] {
		check("run", run)
		rep, _ := run["report"].(map[string]any)
		check("report", rep)
		nodes, _ := rep["nodes"].([]any)
		if len(nodes) == 0 {
			t.Fatalf("no nodes: %s", out)
		}
		for _, n := range nodes {
			node, _ := n.(map[string]any)
			check("node", node)
		}
		search, _ := run["search"].(map[string]any)
		check("search", search)
	}
	doc, err := os.ReadFile("../../docs/input-bound.md")
	if err != nil {
		t.Fatal(err)
	}
	for what, keys := range want {
		for _, k := range keys {
			if !strings.Contains(string(doc), "`"+k+"`") {
				t.Errorf("docs/input-bound.md does not list the %s field `%s`", what, k)
			}
		}
	}
}
