package cli

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// planTestdata holds MosaicML's reference orders (see its README.md).
const planTestdata = "../../plan/testdata/"

func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := Run(context.Background(), args, &out, &errOut)
	return out.String(), err
}

// TestPlanJSONFixtures checks `sluice plan --json` against MosaicML's
// generate_work for cases of orders_a.json, reading dataset_a's index.json.
func TestPlanJSONFixtures(t *testing.T) {
	b, err := readGzipFile(planTestdata + "orders_a.json.gz")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Cases []struct {
			Params struct {
				Shuffle           bool   `json:"shuffle"`
				ShuffleAlgo       string `json:"shuffle_algo"`
				ShuffleSeed       int64  `json:"shuffle_seed"`
				NumCanonicalNodes int    `json:"num_canonical_nodes"`
				BatchSize         int    `json:"batch_size"`
			} `json:"params"`
			World struct {
				NumNodes       int `json:"num_nodes"`
				RanksPerNode   int `json:"ranks_per_node"`
				WorkersPerRank int `json:"workers_per_rank"`
			} `json:"world"`
			Epoch                int64   `json:"epoch"`
			SampleInEpoch        int64   `json:"sample_in_epoch"`
			InitialPhysicalNodes *int    `json:"initial_physical_nodes"`
			WorkShape            []int   `json:"work_shape"`
			Work                 []int64 `json:"work"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	dataset := planTestdata + "dataset_a"
	for i, c := range f.Cases {
		if i%7 != 0 && c.SampleInEpoch == 0 { // a spread of cases plus every resumed one
			continue
		}
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			p := c.Params
			args := []string{"plan", "--json", "--shuffle-algo", p.ShuffleAlgo,
				"--shuffle-seed", strconv.FormatInt(p.ShuffleSeed, 10),
				"--num-canonical-nodes", strconv.Itoa(p.NumCanonicalNodes),
				"--batch-size", strconv.Itoa(p.BatchSize),
				"--nodes", strconv.Itoa(c.World.NumNodes), "--ranks-per-node", strconv.Itoa(c.World.RanksPerNode),
				"--workers-per-rank", strconv.Itoa(c.World.WorkersPerRank),
				"--epoch", strconv.FormatInt(c.Epoch, 10), "--sample-in-epoch", strconv.FormatInt(c.SampleInEpoch, 10)}
			if p.Shuffle {
				args = append(args, "--shuffle")
			}
			if c.InitialPhysicalNodes != nil {
				args = append(args, "--initial-physical-nodes", strconv.Itoa(*c.InitialPhysicalNodes))
			}
			// Alternate between the directory and the index file.
			if i%2 == 0 {
				args = append(args, dataset)
			} else {
				args = append(args, dataset+"/index.json")
			}
			out, err := runCLI(t, args...)
			if err != nil {
				t.Fatal(err)
			}
			var got struct {
				WorkShape []int   `json:"work_shape"`
				Work      []int64 `json:"work"`
			}
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("output is not JSON: %v", err)
			}
			if d := cmp.Diff(c.WorkShape, got.WorkShape); d != "" {
				t.Errorf("work_shape (-want +got):\n%s", d)
			}
			if d := cmp.Diff(c.Work, got.Work); d != "" {
				t.Errorf("work (-want +got):\n%s", d)
			}
			if !strings.HasPrefix(out, `{"work_shape": [`) {
				t.Errorf("output does not use Python's separators: %.40s", out)
			}
		})
	}
}

func readGzipFile(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	return io.ReadAll(zr)
}

func TestPlanShardSizesEqualsDataset(t *testing.T) {
	a, err := runCLI(t, "plan", "--json", "--shuffle", "--batch-size", "4", "--nodes", "2", "--ranks-per-node", "2", planTestdata+"dataset_a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := runCLI(t, "plan", "--json", "--shuffle", "--batch-size", "4", "--nodes", "2", "--ranks-per-node", "2", "--shard-sizes", "155,155,154,155,154,154,73")
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Error("--shard-sizes plan differs from the dataset's")
	}
}

// TestPlanURL reads the index through the storage registry.
func TestPlanURL(t *testing.T) {
	abs, err := filepath.Abs(planTestdata + "dataset_a")
	if err != nil {
		t.Fatal(err)
	}
	a, err := runCLI(t, "plan", "--json", "--shuffle", "--batch-size", "4", "file://"+filepath.ToSlash(abs))
	if err != nil {
		t.Fatal(err)
	}
	b, err := runCLI(t, "plan", "--json", "--shuffle", "--batch-size", "4", abs)
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Error("plan read through file:// differs from the local path's")
	}
}

func TestPlanReadable(t *testing.T) {
	out, err := runCLI(t, "plan", "--num-samples", "10", "--batch-size", "2", "--ranks-per-node", "2")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"10 samples in 1 shards", "1 nodes × 2 ranks × 1 workers", "step 0 rank 0: 0 2", "step 0 rank 1: 1 3", "step 2 rank 1: 9"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	out, err = runCLI(t, "plan", "--shard-sizes", "4,6", "--batch-size", "2", "--ranks-per-node", "2", "--rank", "1", "--step", "1")
	if err != nil {
		t.Fatal(err)
	}
	want := "epoch 0, step 1, rank 1 (node 0, local rank 1): 2 samples\nsample\tshard\tindex\n5\t1\t1\n7\t1\t3\n"
	if out != want {
		t.Errorf("batch view = %q, want %q", out, want)
	}
	out, err = runCLI(t, "plan", "--num-samples", "100", "--batch-size", "2", "--max-steps", "3")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "47 more steps") {
		t.Errorf("truncation note missing:\n%s", out)
	}
}

func TestPlanStreams(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, samples ...int) string {
		var shards []string
		for i, n := range samples {
			shards = append(shards, `{"column_encodings": ["int"], "column_names": ["x"], "column_sizes": [8], "compression": null, "format": "mds", "hashes": [], "raw_data": {"basename": "shard.`+
				strconv.Itoa(i)+`.mds", "bytes": 100, "hashes": {}}, "samples": `+strconv.Itoa(n)+`, "size_limit": 240, "version": 2, "zip_data": null}`)
		}
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		idx := `{"shards": [` + strings.Join(shards, ", ") + `], "version": 2}`
		if err := os.WriteFile(filepath.Join(p, "index.json"), []byte(idx), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a := write("a", 6, 6, 6, 5)
	b := write("b", 6, 5)
	// Spec §12.5, random batching.
	out, err := runCLI(t, "plan", "--json", "--shuffle", "--batch-size", "4", "--num-canonical-nodes", "2",
		"--shuffle-block-size", "10", "--epoch-size", "40", "--ranks-per-node", "2", "--workers-per-rank", "2",
		"--stream", a+",proportion=0.75", "--stream", b+",proportion=0.25")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"work_shape": [1, 2, 2, 3, 4], "work": [18, 19, 20, 4, 11, 8, 7, 6, 27, 23, 29, 24, 21, 5, 22, 3, 28, 9, 10, 26, -1, -1, -1, -1, 0, 5, 4, 1, 17, 6, 11, 12, 31, 33, 16, 32, 3, 2, 8, 10, 14, 30, 15, 13, -1, -1, -1, -1]}` + "\n"
	if out != want {
		t.Errorf("streams plan =\n%s\nwant\n%s", out, want)
	}
	out, err = runCLI(t, "plan", "--batch-size", "4", "--stream", a+",repeat=2", "--stream", b+",choose=3")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "choose 46") || !strings.Contains(out, "choose 3") {
		t.Errorf("stream weights missing:\n%s", out)
	}
}

// TestPlanState resumes from MosaicML's state dict: the plan continues with
// the batches the real library yielded after load_state_dict.
func TestPlanState(t *testing.T) {
	b, err := os.ReadFile(planTestdata + "state_dicts.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Cases []struct {
			StateDict          json.RawMessage      `json:"state_dict"`
			WorldSize          int                  `json:"world_size"`
			WorkersPerRank     int                  `json:"workers_per_rank"`
			BatchesAfterResume map[string][][]int64 `json:"batches_after_resume"`
			Params             struct {
				Shuffle     bool   `json:"shuffle"`
				ShuffleAlgo string `json:"shuffle_algo"`
			} `json:"params"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	for i, c := range f.Cases {
		state := filepath.Join(t.TempDir(), "state.json")
		if err := os.WriteFile(state, c.StateDict, 0o644); err != nil {
			t.Fatal(err)
		}
		args := []string{"plan", "--state", state, "--batch-size", "4", "--shuffle-algo", c.Params.ShuffleAlgo,
			"--ranks-per-node", strconv.Itoa(c.WorldSize), "--workers-per-rank", strconv.Itoa(c.WorkersPerRank),
			"--rank", "0", "--max-steps", "0", planTestdata + "dataset_a"}
		if c.Params.Shuffle {
			args = append(args, "--shuffle")
		}
		out, err := runCLI(t, args...)
		if err != nil {
			t.Fatal(err)
		}
		want := c.BatchesAfterResume["0"]
		for step, batch := range want {
			line := "step " + strconv.Itoa(step) + " rank 0: " + strings.Trim(strings.Join(strings.Fields(strings.Trim(jsonInts(batch), "[]")), " "), " ")
			if !strings.Contains(out, line+"\n") {
				t.Fatalf("case %d: output lacks %q", i, line)
			}
		}
	}
}

func jsonInts(x []int64) string {
	var parts []string
	for _, v := range x {
		parts = append(parts, strconv.FormatInt(v, 10))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func TestPlanErrors(t *testing.T) {
	for _, args := range [][]string{
		{"plan", "--num-samples", "10"},                                            // no batch size
		{"plan", "--batch-size", "2"},                                              // no dataset
		{"plan", "--batch-size", "2", "--num-samples", "10", "--shard-sizes", "1"}, // two sources
		{"plan", "--batch-size", "2", "--shard-sizes", "1,x"},
		{"plan", "--batch-size", "2", "--num-samples", "10", "--shuffle-algo", "bogus"},
		{"plan", "--batch-size", "2", "--stream", "/nonexistent,proportion=1"},
		{"plan", "--batch-size", "2", "--stream", "x,weight=1"},
		{"plan", "--batch-size", "2", "/nonexistent/dataset"},
		{"plan", "--batch-size", "2", "--num-samples", "10", "--rank", "3", "--step", "0"},
		{"plan", "--batch-size", "2", "--num-samples", "10", "--rank", "0", "--step", "99"},
		{"plan", "--batch-size", "2", "--num-samples", "10", "--epoch-size", "-1k"},
		{"plan", "--batch-size", "2", "--num-samples", "10", "--state", "/nonexistent/state.json"},
		{"plan", "--batch-size", "2", "--num-samples", "10", "--state", planTestdata + "dataset_a/index.json"},
	} {
		if _, err := runCLI(t, args...); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

func FuzzParseStreamFlag(f *testing.F) {
	f.Add("path,proportion=0.5")
	f.Add("s3://b/x,repeat=2,choose=10k")
	f.Add(",=")
	f.Fuzz(func(t *testing.T, s string) {
		st, path, err := parseStreamFlag(s)
		if err != nil {
			return
		}
		if path == "" {
			t.Fatalf("%q: empty path accepted", s)
		}
		if st.Choose != nil && *st.Choose < 0 {
			t.Fatalf("%q: negative choose", s)
		}
	})
}
