package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSimulateJSON runs the command on a real index and checks what no
// model choice can change: every shard is downloaded once without a
// limit, index included, and the samples are the epoch's.
func TestSimulateJSON(t *testing.T) {
	out, err := runCLI(t, "simulate", planTestdata+"dataset_a", "--batch-size", "4", "--nodes", "2",
		"--ranks-per-node", "2", "--workers-per-rank", "2", "--shuffle", "--step-time", "10ms",
		"--latency", "5ms", "--bandwidth-per-node", "10mb", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var r simulateRun
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	data, err := os.ReadFile(filepath.Join(planTestdata, "dataset_a", "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Report.Nodes) != 2 {
		t.Fatalf("%d nodes, want 2", len(r.Report.Nodes))
	}
	var samples int64
	for _, n := range r.Report.Nodes {
		samples += n.Samples
		if n.StoreBytes <= int64(len(data)) || n.StoreRequests < 2 {
			t.Errorf("node %d: %d bytes in %d requests", n.Node, n.StoreBytes, n.StoreRequests)
		}
		if n.TimeToFirstBatchS <= 0.005 {
			t.Errorf("node %d: first batch at %.4fs, before one request's latency", n.Node, n.TimeToFirstBatchS)
		}
	}
	if samples == 0 || r.Report.Samples != samples {
		t.Errorf("samples %d, nodes sum to %d", r.Report.Samples, samples)
	}
}

func TestSimulateVarySearchCSV(t *testing.T) {
	csv := filepath.Join(t.TempDir(), "steps.csv")
	out, err := runCLI(t, "simulate", "--shards", "40", "--samples", "2000", "--sample-bytes", "1kb",
		"--batch-size", "5", "--ranks-per-node", "2", "--shuffle", "--shuffle-algo", "py1s", "--step-time", "5ms",
		"--bandwidth-per-node", "20mb", "--latency", "2ms", "--epochs", "2", "--predownload", "200",
		"--vary", "cache_limit=none,200kb", "--search-min-cache", "--steps-csv", csv)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"== cache_limit=none", "== cache_limit=200kb", "smallest cache limit", "node 0:"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	b, err := os.ReadFile(csv)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if lines[0] != "setting,node,step,input_wait_s" || len(lines) < 10 {
		t.Errorf("steps CSV: %d lines, header %q", len(lines), lines[0])
	}
}

func TestSimulateErrors(t *testing.T) {
	for _, args := range [][]string{
		{"simulate", "--shards", "4", "--samples", "100"},
		{"simulate", "--batch-size", "2"},
		{"simulate", "--batch-size", "2", "--shards", "4", "--samples", "100", "--vary", "bogus=1"},
		{"simulate", "--batch-size", "2", "--shards", "4", "--samples", "100", "--step-time", "normal:1s"},
		{"simulate", "--batch-size", "2", "--shards", "4", "--samples", "100", "--cache-limit", "lots"},
		{"simulate", "--batch-size", "2", "--shard-sizes", "4,x"},
	} {
		if _, err := runCLI(t, args...); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

// --prefetch-factor is the DataLoader's: a worker that may read further
// ahead of the loop gets the slow batches (a new shard each third batch,
// read on demand: no prefetch budget) ready before their steps.
func TestSimulatePrefetchFactor(t *testing.T) {
	stalls := map[string]int{}
	for _, f := range []string{"1", "4"} {
		// 6 shards of 30 samples × 100 B, batches of 10: the index is
		// 2400 B, the cache holds it and two shards (no prefetch budget
		// for one worker).
		out, err := runCLI(t, "simulate", "--shard-sizes", "30,30,30,30,30,30", "--sample-bytes", "100",
			"--batch-size", "10", "--workers-per-rank", "1", "--latency", "300ms", "--step-time", "150ms",
			"--cache-limit", "8400", "--prefetch-factor", f, "--json")
		if err != nil {
			t.Fatal(err)
		}
		var r simulateRun
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		stalls[f] = r.Report.StalledSteps
	}
	t.Logf("stalled steps: %v", stalls)
	if stalls["1"] == 0 || stalls["4"] >= stalls["1"] {
		t.Errorf("stalled steps with prefetch factor 1: %d, 4: %d; want fewer with 4", stalls["1"], stalls["4"])
	}
	if _, err := runCLI(t, "simulate", "--shards", "4", "--samples", "100", "--batch-size", "2", "--prefetch-factor", "-1"); err == nil {
		t.Error("--prefetch-factor -1: no error")
	}
	out, err := runCLI(t, "simulate", "--shards", "4", "--samples", "100", "--batch-size", "2", "--workers-per-rank", "2",
		"--vary", "prefetch_factor=1,3")
	if err != nil || !strings.Contains(out, "== prefetch_factor=3") {
		t.Errorf("--vary prefetch_factor: %v\n%s", err, out)
	}
}
