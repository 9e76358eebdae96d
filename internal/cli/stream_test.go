package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func streamRunCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := Run(context.Background(), args, &out, &errOut)
	return out.String(), err
}

// TestQuickstartThenStream runs the quickstart on a small dataset, then
// streams its store with `sluice stream`: stop, save, resume elsewhere.
func TestQuickstartThenStream(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and streams a dataset")
	}
	dir := t.TempDir()
	out, err := streamRunCLI(t, "quickstart", "--dir", dir, "--size", "4mb")
	if err != nil {
		t.Fatalf("quickstart: %v\n%s", err, out)
	}
	if !strings.Contains(out, "every one of the 960 samples came exactly once") {
		t.Fatalf("quickstart output lacks the exactly-once check:\n%s", out)
	}
	remote := "file://" + filepath.Join(dir, "remote")
	local := filepath.Join(dir, "cli-cache")
	state := filepath.Join(dir, "s.json")
	type report struct {
		Samples, Misses, BytesFetched int64
		SampleInEpoch                 int64 `json:"sample_in_epoch_at_start"`
		State                         struct {
			SampleInEpoch int64 `json:"sample_in_epoch"`
		}
	}
	parse := func(s string) report {
		var r report
		if err := json.Unmarshal([]byte(s), &r); err != nil {
			t.Fatalf("--json output %q: %v", s, err)
		}
		return r
	}
	out, err = streamRunCLI(t, "stream", remote, "--local", local, "--cache-limit", "3mb", "--shuffle",
		"--batch-size", "8", "--world-size", "2", "--rank", "0", "--limit", "200", "--save-state", state, "--json")
	if err != nil {
		t.Fatalf("stream: %v\n%s", err, out)
	}
	r := parse(out)
	if r.Samples != 200 || r.State.SampleInEpoch != 400 {
		t.Fatalf("first run: %d samples, state at %d; want 200 and 400 (2 ranks)", r.Samples, r.State.SampleInEpoch)
	}
	out, err = streamRunCLI(t, "stream", remote, "--local", local, "--cache-limit", "3mb", "--shuffle",
		"--batch-size", "8", "--resume", state, "--json", "--decode")
	if err != nil {
		t.Fatalf("stream --resume: %v\n%s", err, out)
	}
	if r := parse(out); r.Samples != 960-400 || r.SampleInEpoch != 400 {
		t.Fatalf("resumed on 1 rank: %d samples from %d, want %d from 400", r.Samples, r.SampleInEpoch, 960-400)
	}
	if _, err := os.Stat(state); err != nil {
		t.Fatal(err)
	}

	// Human-readable figures.
	out, err = streamRunCLI(t, "stream", remote, "--local", local, "--limit", "64", "--step-time", "1ms", "--batch-size", "8")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"samples/s", "time to first sample", "input wait", "cache:", "state:"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	// A limit that cannot hold the working set fails at once with the
	// minimum that would work.
	_, err = streamRunCLI(t, "stream", remote, "--local", filepath.Join(dir, "tiny"), "--cache-limit", "100kb")
	if err == nil || !strings.Contains(err.Error(), "at least") {
		t.Fatalf("stream with a 100kb cache: %v, want an error naming the minimum", err)
	}
}
