package bench

import (
	"context"
	"errors"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/mds"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/filestore"
	"github.com/sluicedata/sluice/stream"
)

func dataset(t *testing.T, n int) string {
	dir := filepath.Join(t.TempDir(), "remote")
	w, err := mds.NewWriter(dir, &mds.WriterOptions{Columns: map[string]string{"id": "int", "data": "bytes"}, SizeLimit: 8192})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := w.Write(format.Sample{"id": int64(i), "data": []byte(strings.Repeat("x", 200+i%7))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// fakeSMI puts an nvidia-smi on PATH that prints two GPUs' readings in
// its looping mode until killed, as the real one does.
func fakeSMI(t *testing.T) {
	bin := t.TempDir()
	script := `#!/bin/sh
case "$*" in *--query-gpu=index,utilization.gpu,memory.used*--format=csv,noheader,nounits*) ;; *) echo "bad args: $*" >&2; exit 2;; esac
i=0
while :; do
  echo "0, $((40 + i % 50)), 1024"
  echo "1, $((10 + i % 30)), 2048"
  echo "[N/A], [N/A], [N/A]"
  i=$((i + 1))
  sleep 0.05
done
`
	if err := os.WriteFile(filepath.Join(bin, "nvidia-smi"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
}

func TestRunAndPlot(t *testing.T) {
	fakeSMI(t)
	remote := dataset(t, 600)
	reg := &storage.Registry{}
	reg.Register("file", filestore.Open)
	out := t.TempDir()
	c := &Config{
		Options: stream.Options{Remote: "file://" + remote, Registry: reg, BatchSize: 16, Shuffle: true},
		Out:     out, StepTime: 2 * time.Millisecond, Workers: 2, Baseline: true, GPUInterval: 50 * time.Millisecond,
	}
	res, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != 3 {
		t.Fatalf("%d runs, want cold, warm and baseline", len(res.Runs))
	}
	for i, want := range []string{"cold", "warm", "baseline"} {
		r := res.Runs[i]
		if r.Config != want || r.Samples != 600 || r.Steps != 38 {
			t.Errorf("run %d: %+v, want %s with 600 samples in 38 steps", i, r, want)
		}
	}
	if res.Runs[0].BytesFetched == 0 || res.Runs[1].BytesFetched != 0 {
		t.Errorf("bytes fetched cold %d, warm %d: want some, then none", res.Runs[0].BytesFetched, res.Runs[1].BytesFetched)
	}
	if len(res.GPU) == 0 {
		t.Fatal("no GPU samples from the fake nvidia-smi")
	}
	gpus := map[int]bool{}
	for _, g := range res.GPU {
		gpus[g.GPU] = true
	}
	if !gpus[0] || !gpus[1] {
		t.Errorf("GPUs seen %v, want 0 and 1", gpus)
	}
	b, err := os.ReadFile(filepath.Join(out, StepsFile))
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(string(b), "\n"); lines != 1+3*38 {
		t.Errorf("steps.csv has %d lines, want %d", lines, 1+3*38)
	}
	files, err := Plot(out, "png")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"throughput.png", "input_wait.png", "input_wait_distribution.png", "gpu_utilization.png"}
	if len(files) != len(want) {
		t.Fatalf("charts %v, want %v", files, want)
	}
	for i, f := range files {
		if filepath.Base(f) != want[i] {
			t.Errorf("chart %d is %s, want %s", i, f, want[i])
		}
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(fh)
		fh.Close()
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if img.Bounds().Dx() < 200 || img.Bounds().Dy() < 100 {
			t.Errorf("%s: %v", f, img.Bounds())
		}
	}
	svg, err := Plot(out, "svg")
	if err != nil || len(svg) != 4 {
		t.Fatalf("svg: %v %v", svg, err)
	}
	if b, _ := os.ReadFile(svg[0]); !strings.Contains(string(b), "<svg") {
		t.Errorf("%s is not SVG", svg[0])
	}
	// Run again into the same directory without GPU readings: the first
	// run's gpu.csv and GPU chart must not pass for this run's.
	c.NoGPU, c.Baseline = true, false
	if _, err := Run(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(out, GPUFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("gpu.csv of the first run is still there (%v)", err)
	}
	files, err = Plot(out, "png")
	if err != nil || len(files) != 3 {
		t.Fatalf("charts after a run without GPU: %v %v", files, err)
	}
	if _, err := os.Stat(filepath.Join(out, "gpu_utilization.png")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the first run's GPU chart is still there (%v)", err)
	}
}

func TestPlotRejectsBadCSV(t *testing.T) {
	dir := t.TempDir()
	if _, err := Plot(dir, "png"); err == nil {
		t.Error("no CSV files: no error")
	}
	os.WriteFile(filepath.Join(dir, SummaryFile), []byte("config,samples\ncold,1\n"), 0o644)
	if _, err := Plot(dir, "png"); err == nil {
		t.Error("bad header: no error")
	}
	if _, err := Plot(dir, "gif"); err == nil {
		t.Error("gif accepted")
	}
	hdr := strings.Join(summaryHeader, ",") + "\n"
	os.WriteFile(filepath.Join(dir, SummaryFile), []byte(hdr+"cold,1,1,x,0,0,0,zz,0\n"), 0o644)
	os.WriteFile(filepath.Join(dir, StepsFile), []byte(strings.Join(stepsHeader, ",")+"\n"), 0o644)
	if _, err := Plot(dir, "png"); err == nil {
		t.Error("non-number: no error")
	}
}

func TestParseGPULine(t *testing.T) {
	for line, ok := range map[string]bool{
		"0, 87, 10240": true, "3, 0, 0": true, "1, 87 %, 100 MiB": true,
		"[N/A], [N/A], [N/A]": false, "0, 101, 1": false, "-1, 5, 5": false, "garbage": false, "": false,
	} {
		if _, got := parseGPULine(line); got != ok {
			t.Errorf("%q: %v, want %v", line, got, ok)
		}
	}
}
