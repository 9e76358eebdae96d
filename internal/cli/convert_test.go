package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicedata/sluice/convert"
	"github.com/sluicedata/sluice/convert/input"
)

func runConvertCLI(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := Run(context.Background(), args, &out, &errb)
	return out.String(), errb.String(), err
}

func TestConvertCommand(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	var b bytes.Buffer
	for i := range 500 {
		fmt.Fprintf(&b, `{"id": %d, "text": "row %d"}`+"\n", i, i)
	}
	if err := os.WriteFile(in, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	stdout, stderr, err := runConvertCLI(t, "convert", in, out, "--compression", "zstd", "--hashes", "xxh64,sha1",
		"--size-limit", "4kb", "--progress", "plain")
	if err != nil {
		t.Fatalf("convert: %v\n%s", err, stderr)
	}
	if !strings.Contains(stdout, "PASSED") || !strings.Contains(stdout, "500 in, 500 out, 0 skipped") {
		t.Errorf("summary:\n%s", stdout)
	}
	if !strings.Contains(stderr, "convert: done: 500 samples in") {
		t.Errorf("progress lines:\n%s", stderr)
	}
	// The result passes verify, and the report sits next to the index.
	if _, stderr, err := runConvertCLI(t, "verify", out); err != nil {
		t.Fatalf("verify: %v\n%s", err, stderr)
	}
	raw, err := os.ReadFile(filepath.Join(out, convert.ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	var rep convert.Report
	if err := json.Unmarshal(raw, &rep); err != nil || rep.SamplesOut != 500 || rep.Shards < 2 || !rep.Passed {
		t.Fatalf("report %s: %v", raw, err)
	}

	// Two parts, then merge: the merged dataset verifies and has every row.
	parts := filepath.Join(dir, "parts")
	for i := range 2 {
		if _, stderr, err := runConvertCLI(t, "convert", in, parts, "--part", fmt.Sprintf("%d/2", i), "--progress", "none", "--json"); err != nil {
			t.Fatalf("part %d: %v\n%s", i, err, stderr)
		}
	}
	if _, stderr, err := runConvertCLI(t, "merge", parts); err != nil {
		t.Fatalf("merge: %v\n%s", err, stderr)
	}
	stdout, stderr, err = runConvertCLI(t, "verify", parts)
	if err != nil {
		t.Fatalf("verify merged: %v\n%s%s", err, stdout, stderr)
	}
}

func TestConvertCommandErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"convert", filepath.Join(dir, "missing.jsonl"), filepath.Join(dir, "o")}, "missing.jsonl"},
		{[]string{"convert", "x.jsonl", filepath.Join(dir, "o"), "--part", "2/2"}, "bad --part"},
		// The flag is named, and the value once (before: "bad size"
		// without the flag, the value twice).
		{[]string{"convert", "x.jsonl", filepath.Join(dir, "o"), "--size-limit", "5gb"}, `convert: --size-limit "5gb": MDS shards must stay below 4 GiB`},
		{[]string{"convert", "x.jsonl", filepath.Join(dir, "o"), "--size-limit", "nan"}, `convert: --size-limit: stream: bad byte count "nan" (want`},
		{[]string{"convert", "x.jsonl", filepath.Join(dir, "o"), "--size-limit", "-1kb"}, `convert: --size-limit: stream: bad byte count "-1kb" (want`},
		{[]string{"convert", "x.jsonl", filepath.Join(dir, "o"), "--compression", "lz4"}, "lz4"},
		{[]string{"convert", "x.unknown", filepath.Join(dir, "o")}, "format"},
	} {
		_, _, err := runConvertCLI(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err = %v, want it to mention %q", c.args, err, c.want)
		}
	}
}

func TestResolvePart(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	for _, c := range []struct {
		flag  string
		parts int
		env   map[string]string
		want  input.Part
		err   bool
	}{
		{"", 0, nil, input.Part{}, false},
		{"3/8", 0, map[string]string{"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_COUNT": "2"}, input.Part{Index: 3, Count: 8}, false},
		{"", 0, map[string]string{"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_COUNT": "4"}, input.Part{Index: 1, Count: 4}, false},
		{"", 0, map[string]string{"SLURM_ARRAY_TASK_ID": "11", "SLURM_ARRAY_TASK_COUNT": "4", "SLURM_ARRAY_TASK_MIN": "10"}, input.Part{Index: 1, Count: 4}, false},
		{"", 5, map[string]string{"JOB_COMPLETION_INDEX": "4"}, input.Part{Index: 4, Count: 5}, false},
		{"", 5, map[string]string{"JOB_COMPLETION_INDEX": "5"}, input.Part{}, true},
		{"", 5, nil, input.Part{}, true},
		{"1", 0, nil, input.Part{}, true},
		{"-1/2", 0, nil, input.Part{}, true},
	} {
		got, err := resolvePart(c.flag, c.parts, env(c.env))
		if (err != nil) != c.err || got != c.want {
			t.Errorf("resolvePart(%q, %d, %v) = %v, %v; want %v, err %v", c.flag, c.parts, c.env, got, err, c.want, c.err)
		}
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"64mb": 64 << 20, "1.5kb": 1536, "100b": 100, "100": 100, "0": 0, "none": 0, "1gb": 1 << 30, "64MiB": 64 << 20} {
		got, err := parseSize(in)
		if err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"4gb", "4GiB", "-1", "x", "1.5xb", "nan", "inf"} {
		if _, err := parseSize(bad); err == nil {
			t.Errorf("parseSize(%q) succeeded", bad)
		}
	}
}

func TestConvertQualityGateExitCode(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "m.csv")
	if err := os.WriteFile(in, []byte("url\nfile:///nonexistent/a.jpg\nfile:///nonexistent/b.jpg\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, _, err := runConvertCLI(t, "convert", in, filepath.Join(dir, "o"), "--fetch", "url", "--min-success-rate", "0.5", "--progress", "none")
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != 3 || !errors.Is(err, convert.ErrQualityGate) {
		t.Fatalf("err = %v, want exit code 3 and ErrQualityGate", err)
	}
	if !strings.Contains(stdout, "FAILED") || !strings.Contains(stdout, "scheme_not_allowed") {
		t.Errorf("summary:\n%s", stdout)
	}
}

func TestConvertRejectsOddFlags(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	if err := os.WriteFile(in, []byte(`{"id": 1}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, extra := range [][]string{
		{"--workers", "-3"}, {"--fetch-concurrency", "-1"}, {"--nulls", "maybe"}, {"--fetch-allow-net", "10.0.0.0/99"},
		{"--fetch-schemes", "ftp"}, {"--image-encoding", "gif"}, {"--pack", "-2"}, {"--tokenize", "text"},
		{"--pack-drop-last"},
	} {
		args := append([]string{"convert", in, filepath.Join(dir, "out"), "--progress", "none"}, extra...)
		if _, _, err := runConvertCLI(t, args...); err == nil {
			t.Errorf("convert %v succeeded", extra)
		}
	}
	// The same command twice: the second run finds the dataset finished.
	args := []string{"convert", in, filepath.Join(dir, "ok"), "--progress", "none"}
	for i := range 2 {
		if _, _, err := runConvertCLI(t, args...); err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
	}
}
