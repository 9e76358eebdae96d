package cli

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicedata/sluice/config"
	"github.com/sluicedata/sluice/internal/s3test"
)

func writeConfig(t *testing.T, doc string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "job.yaml")
	if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRunDryRun(t *testing.T) {
	p := writeConfig(t, "kind: stream\nargs: [s3://b/ds]\nflags:\n  batch-size: 16\n  shuffle: true\n  local: /cache/ds\n")
	out, err := streamRunCLI(t, "run", "--dry-run", p)
	if err != nil {
		t.Fatal(err)
	}
	if want := "sluice stream s3://b/ds --batch-size=16 --shuffle=true --local=/cache/ds\n"; out != want {
		t.Errorf("dry run %q, want %q", out, want)
	}
	// SLUICE_CONFIG instead of the argument; serve maps to sluice agent.
	t.Setenv("SLUICE_CONFIG", writeConfig(t, "kind: serve\nflags: {dir: /sluice/agent, idle-timeout: -1s}\n"))
	out, err = streamRunCLI(t, "run", "--dry-run")
	if err != nil || out != "sluice agent --dir=/sluice/agent --idle-timeout=-1s\n" {
		t.Errorf("serve dry run %q, %v", out, err)
	}
}

func TestRunFlagErrorsHaveLines(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		line int
		msg  string
	}{
		{"kind: stream\nargs: [x]\nflags:\n  batch-size: 16\n  bogus: 1\n", 5, "has no flag --bogus"},
		{"kind: stream\nargs: [x]\nflags:\n  batch-size: sixteen\n", 4, "invalid"},
		{"kind: stream\nargs: [x]\nflags:\n  download-timeout: 5 minutes\n", 4, "invalid"},
		{"kind: stream\nargs: [x]\nflags:\n  local: [a, b]\n", 4, "takes one value"},
		{"kind: serve\nflags:\n  help: true\n", 3, "has no flag"},
	} {
		_, err := streamRunCLI(t, "run", "--dry-run", writeConfig(t, tc.doc))
		var ce *config.Error
		if !errors.As(err, &ce) || ce.Line != tc.line || !strings.Contains(ce.Msg, tc.msg) {
			t.Errorf("%q: error %v, want line %d with %q", tc.doc, err, tc.line, tc.msg)
		}
	}
	if _, err := streamRunCLI(t, "run"); err == nil || !strings.Contains(err.Error(), "SLUICE_CONFIG") {
		t.Errorf("no config: %v", err)
	}
}

func TestRunStreamsQuickstartDataset(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and streams a dataset")
	}
	dir := t.TempDir()
	if out, err := streamRunCLI(t, "quickstart", "--dir", dir, "--size", "2mb"); err != nil {
		t.Fatalf("quickstart: %v\n%s", err, out)
	}
	p := writeConfig(t, "kind: stream\nargs: [file://"+filepath.Join(dir, "remote")+"]\nflags:\n  local: "+
		filepath.Join(dir, "run-cache")+"\n  batch-size: 8\n  shuffle: true\n  json: true\n")
	out, err := streamRunCLI(t, "run", p)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	var r struct{ Samples int64 }
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.Samples <= 0 {
		t.Fatalf("stream output %q: %v", out, err)
	}
}

func TestRunTrain(t *testing.T) {
	p := writeConfig(t, "kind: train\nenv: {SLUICE_RUN_TEST: hello}\ncommand: [sh, -c, 'echo \"$SLUICE_RUN_TEST $SLUICE_CONFIG\"; exit 3']\n")
	out, err := streamRunCLI(t, "run", p)
	if ExitCode(err) != 3 {
		t.Fatalf("exit code %d (%v), want 3", ExitCode(err), err)
	}
	if out != "hello "+p+"\n" {
		t.Errorf("output %q", out)
	}
}

func TestRunPrint(t *testing.T) {
	p := writeConfig(t, "kind: train\ncommand: [python3, train.py]\ndataset:\n  remote: s3://b/ds\n  batch_size: 4\ntraining: {lr: 0.1}\n")
	out, err := streamRunCLI(t, "run", "--print", p)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Kind     string
		Dataset  map[string]any
		Lines    map[string]int `json:"dataset_lines"`
		Training map[string]any
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Kind != "train" || doc.Dataset["batch_size"] != 4.0 || doc.Lines["batch_size"] != 5 || doc.Training["lr"] != 0.1 {
		t.Errorf("printed %s", out)
	}
	_, err = streamRunCLI(t, "run", "--print", writeConfig(t, "kind: train\ncommand: [x]\ntraining: {1: a}\n"))
	if !errors.Is(err, config.ErrInvalid) {
		t.Errorf("non-string keys: %v", err)
	}
}

func TestRunFromS3(t *testing.T) {
	srv := s3test.Require(t)
	srv.SetCredentialEnv(t)
	t.Setenv("S3_ENDPOINT_URL", srv.Endpoint)
	t.Setenv("AWS_REGION", srv.Region)
	src := t.TempDir()
	doc := "kind: convert\nargs: [in.jsonl, s3://b/out]\nflags:\n  part: 2/4\n"
	if err := os.WriteFile(filepath.Join(src, "convert.yaml"), []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	dst := "s3://" + srv.Bucket + "/run-test-" + filepath.Base(src)
	if out, err := streamRunCLI(t, "cp", src, dst); err != nil {
		t.Fatalf("cp: %v\n%s", err, out)
	}
	out, err := streamRunCLI(t, "run", "--dry-run", dst+"/convert.yaml")
	if err != nil || out != "sluice convert in.jsonl s3://b/out --part=2/4\n" {
		t.Errorf("run from S3: %q, %v", out, err)
	}
}

func TestShellJoin(t *testing.T) {
	if got := shellJoin([]string{"a", "b c", "", "it's", "--x=1"}); got != `a 'b c' '' 'it'\''s' --x=1` {
		t.Errorf("shellJoin %s", got)
	}
}
