package cli

import (
	"encoding/json"
	"math"
	"path/filepath"
	"testing"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/mds"
)

// TestStreamInputWaitIsTheLoops checks sluice stream --step-time's input
// wait: the loop's own wait for its batches (input_wait_s), which holds
// the stream's wait for shards (wait_s) and whatever else a read costs,
// and the fraction computed from it. Before, the fraction was the
// stream's wait for shards over itself plus the steps: under a cache
// limit the quickstart dataset's loop waited 31.8 s of a 53.8 s run
// (the prefetch walk's admissions and evictions run in Next on the
// loop's goroutine, not counted as a wait for shards), and the report
// said 12.8% input wait where the loop's was 61% (sluice simulate: 55%).
func TestStreamInputWaitIsTheLoops(t *testing.T) {
	dir := t.TempDir()
	remote := filepath.Join(dir, "remote")
	w, err := mds.NewWriter(remote, &mds.WriterOptions{Columns: map[string]string{"id": "int", "pad": "bytes"},
		SizeLimit: 16 << 10, Compression: "zstd"})
	if err != nil {
		t.Fatal(err)
	}
	const n, batch = 400, 8
	for i := range n {
		pad := make([]byte, 1000)
		for k := range pad {
			pad[k] = byte(i * k)
		}
		if err := w.Write(format.Sample{"id": int64(i), "pad": pad}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	out, err := runCLI(t, "stream", remote, "--local", filepath.Join(dir, "cache"), "--cache-limit", "200kb",
		"--shuffle", "--batch-size", "8", "--step-time", "2ms", "--progress", "none", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Samples           int64    `json:"samples"`
		ElapsedS          float64  `json:"elapsed_s"`
		WaitS             float64  `json:"wait_s"`
		InputWaitS        *float64 `json:"input_wait_s"`
		InputWaitFraction *float64 `json:"input_wait_fraction"`
		Evictions         int64    `json:"evictions"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if r.Samples != n || r.Evictions == 0 {
		t.Fatalf("%d samples, %d evictions: want %d samples through an evicting cache", r.Samples, r.Evictions, n)
	}
	if r.InputWaitS == nil || r.InputWaitFraction == nil {
		t.Fatalf("no input_wait_s or input_wait_fraction with --step-time: %s", out)
	}
	t.Logf("elapsed %.3fs, stream's wait for shards %.3fs, loop's input wait %.3fs, %d evictions", r.ElapsedS, r.WaitS, *r.InputWaitS, r.Evictions)
	if *r.InputWaitS < r.WaitS {
		t.Errorf("the loop's input wait %.6fs is less than the stream's wait for shards %.6fs, which happens inside it", *r.InputWaitS, r.WaitS)
	}
	steps := float64((n + batch - 1) / batch)
	want := *r.InputWaitS / (*r.InputWaitS + steps*0.002)
	if math.Abs(*r.InputWaitFraction-want) > 1e-9 {
		t.Errorf("input_wait_fraction %.6f, want the loop's wait over itself plus %v steps of 2ms: %.6f", *r.InputWaitFraction, steps, want)
	}
}
