package cli

import (
	"bytes"
	"context"
	"encoding/csv"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicedata/sluice/format"
)

// debianPython is the interpreter CI installs torch for (.ci/python.sh).
const debianPython = "/usr/bin/python3"

// TestBenchTorchModel runs `sluice bench --torch-model resnet18` on the
// quickstart dataset on the CPU with tiny images: real ResNet-18 training
// steps in Python over sluice.StreamingDataLoader with two worker
// processes, cold then warm, the plain-files baseline through a torch
// DataLoader, and MosaicML's run, skipped with its reason when streaming
// is not importable. Every run's steps and summary reach the CSV files.
func TestBenchTorchModel(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model in Python")
	}
	if err := exec.Command(debianPython, "-c", "import torch, numpy, PIL").Run(); err != nil {
		if os.Getenv("SLUICE_REQUIRE_SERVICES") == "1" {
			t.Fatalf("%s cannot import torch, numpy and PIL under CI: %v", debianPython, err)
		}
		t.Skipf("%s cannot import torch, numpy and PIL: %v", debianPython, err)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "sluice")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/sluice")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if os.Getenv("SLUICE_TEST_INSTALLED") == "" {
		t.Setenv("PYTHONPATH", filepath.Join(root, "python"))
	}
	t.Setenv("SLUICE_BIN", bin)
	t.Setenv("SLUICE_FEED", "")
	if _, err := runCLI(t, "quickstart", "--dir", dir, "--keep", "--size", "2mb"); err != nil {
		t.Fatal(err)
	}
	// Whole epochs of the quickstart's first 4 shards: a run cut short
	// (--max-steps) leaves its workers' prefetches in flight, so the warm
	// run after it downloads whatever those had not finished (a -race
	// run's warm run fetched 742,395 bytes). A whole epoch downloads every
	// shard before its last sample is out.
	small, samples := firstShards(t, filepath.Join(dir, "remote"), filepath.Join(dir, "small"), 4)
	out := filepath.Join(dir, "bench")
	var stdout, stderr bytes.Buffer
	err = Run(ctx, []string{"bench", small, "--out", out, "--batch-size", "8",
		"--workers-per-rank", "2", "--baseline", "--no-gpu",
		"--torch-model", "resnet18", "--python", debianPython, "--torch-device", "cpu",
		"--torch-image-size", "32", "--torch-classes", "10", "--torch-threads", "1"}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("bench: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	got := stdout.String()
	for _, want := range []string{"cold:", "warm:", "baseline:", "resnet18 on cpu", "summary.csv", "steps.csv"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	mosaic := exec.Command(debianPython, "-c", "import streaming").Run() == nil
	if !mosaic && !strings.Contains(got, "mosaicml: skipped: MosaicML's streaming package is not importable") {
		t.Errorf("no MosaicML skip message without streaming:\n%s", got)
	}
	rows := readCSVFile(t, filepath.Join(out, "summary.csv"))
	want := map[string]bool{"cold": true, "warm": true, "baseline": true, "mosaicml": mosaic}
	seen := map[string]bool{}
	steps := map[string]int{}
	for _, r := range rows[1:] {
		seen[r[0]] = true
		steps[r[0]], _ = strconv.Atoi(r[2])
		if r[1] != strconv.FormatInt(samples, 10) || steps[r[0]] < int(samples+7)/8 {
			t.Errorf("summary row %v: want the epoch's %d samples in at least %d steps", r, samples, (samples+7)/8)
		}
		for _, i := range []int{3, 4, 7} { // wall, first batch, samples/s
			if v, err := strconv.ParseFloat(r[i], 64); err != nil || v <= 0 {
				t.Errorf("summary row %v: column %s is %q", r, rows[0][i], r[i])
			}
		}
		if f, _ := strconv.ParseFloat(r[6], 64); f < 0 || f >= 1 {
			t.Errorf("summary row %v: input wait fraction %v", r, f)
		}
		fetched, _ := strconv.ParseInt(r[8], 10, 64)
		if (r[0] == "cold") != (fetched > 0) {
			t.Errorf("summary row %v: bytes fetched %d (only the cold run downloads)", r, fetched)
		}
	}
	for k, v := range want {
		if seen[k] != v {
			t.Errorf("summary.csv has run %s: %v, want %v\n%v", k, seen[k], v, rows)
		}
	}
	perRun := map[string]int{}
	for _, r := range readCSVFile(t, filepath.Join(out, "steps.csv"))[1:] {
		perRun[r[0]]++
		if w, err := strconv.ParseFloat(r[3], 64); err != nil || w < 0 {
			t.Errorf("step row %v: input wait %q", r, r[3])
		}
	}
	for k, v := range want {
		if v && perRun[k] != steps[k] {
			t.Errorf("steps.csv: %d steps of %s, summary.csv %d", perRun[k], k, steps[k])
		}
	}
	if err := Run(ctx, []string{"bench", filepath.Join(dir, "remote"), "--out", out, "--torch-model", "vgg99",
		"--python", debianPython, "--no-gpu"}, &bytes.Buffer{}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "resnet18") {
		t.Errorf("--torch-model vgg99: %v, want an error naming resnet18", err)
	}
}

func readCSVFile(t *testing.T, path string) [][]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if err != nil || len(rows) < 2 {
		t.Fatalf("%s: %v\n%s", path, err, b)
	}
	return rows
}

// firstShards writes to dst a dataset of src's first n shards (its
// index.json cut to them, their files copied) and returns dst and its
// sample count.
func firstShards(t *testing.T, src, dst string, n int) (string, int64) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(src, format.IndexFile))
	if err != nil {
		t.Fatal(err)
	}
	idx, err := format.ParseIndex(b)
	if err != nil {
		t.Fatal(err)
	}
	idx.Shards = idx.Shards[:n]
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	var samples int64
	for i := range idx.Shards {
		samples += int64(idx.Shards[i].Samples)
		for _, f := range idx.Shards[i].Files() {
			data, err := os.ReadFile(filepath.Join(src, f.Basename))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dst, f.Basename), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.WriteFile(filepath.Join(dst, format.IndexFile), format.AppendIndex(nil, idx), 0o644); err != nil {
		t.Fatal(err)
	}
	return dst, samples
}
