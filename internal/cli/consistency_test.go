package cli

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sluicedata/sluice/internal/stores"
	"github.com/sluicedata/sluice/internal/version"
	"github.com/sluicedata/sluice/internal/writepipe"
)

// The world shape has one set of names on plan and stream; the old names
// still work, warn on stderr, and leave --json output clean.
func TestWorldFlagsOneNameEverywhere(t *testing.T) {
	canon, _, err := runFmtCLI(t, "plan", "--num-samples", "64", "--batch-size", "2", "--nodes", "2",
		"--ranks-per-node", "2", "--workers-per-rank", "2", "--json")
	if err != nil {
		t.Fatal(err)
	}
	old, stderr, err := runFmtCLI(t, "plan", "--num-samples", "64", "--batch-size", "2", "--world-size", "4",
		"--local-world-size", "2", "--workers", "2", "--json")
	if err != nil {
		t.Fatal(err)
	}
	if canon != old {
		t.Fatalf("deprecated aliases plan differently:\n%s\n%s", canon, old)
	}
	if !json.Valid([]byte(old)) || !strings.Contains(stderr, "--world-size is deprecated") {
		t.Fatalf("stdout %q, stderr %q", old, stderr)
	}
	for _, cmd := range []string{"plan", "stream"} {
		help, _, _ := runFmtCLI(t, cmd, "--help")
		for _, want := range []string{"--nodes", "--ranks-per-node", "--workers-per-rank"} {
			if !strings.Contains(help, want+" ") {
				t.Errorf("%s --help lacks %s", cmd, want)
			}
		}
		for _, hidden := range []string{"--world-size", "--local-world-size", "--workers "} {
			if strings.Contains(help, hidden) {
				t.Errorf("%s --help still shows %s", cmd, hidden)
			}
		}
	}
	ds := filepath.Join(fmtFixtures, "fixed_only", "data")
	a, _, err := runFmtCLI(t, "stream", ds, "--nodes", "2", "--ranks-per-node", "1", "--rank", "1", "--batch-size", "4", "--json")
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := runFmtCLI(t, "stream", ds, "--world-size", "2", "--rank", "1", "--batch-size", "4", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var ra, rb streamReport
	if json.Unmarshal([]byte(a), &ra) != nil || json.Unmarshal([]byte(b), &rb) != nil || ra.WorldSize != 2 || ra.Samples != rb.Samples {
		t.Fatalf("stream with canonical and deprecated flags:\n%s\n%s", a, b)
	}
}

func TestNegativeCountsRejected(t *testing.T) {
	ds := filepath.Join(fmtFixtures, "fixed_only", "data")
	for _, args := range [][]string{
		{"dump", ds, "--count", "-5"},
		{"dump", ds, "--from", "-1"},
		{"stream", ds, "--limit", "-1"},
		{"stream", ds, "--world-size", "0"},
		{"stream", ds, "--nodes", "0"},
		{"stream", ds, "--ranks-per-node", "-1"},
		{"stream", ds, "--workers-per-rank", "-1"},
		{"stream", ds, "--batch-size", "0"},
		{"plan", ds, "--batch-size", "4", "--nodes", "0"},
		{"plan", ds, "--batch-size", "4", "--workers-per-rank", "-1"},
		{"cp", "-j", "0", ds, t.TempDir()},
	} {
		if out, _, err := runFmtCLI(t, args...); err == nil {
			t.Errorf("%v accepted: %.200s", args, out)
		}
	}
	// -1 is dump's documented "to the end".
	if out, _, err := runFmtCLI(t, "dump", ds, "--count", "-1"); err != nil || strings.Count(out, "\n") != 24 {
		t.Errorf("dump --count -1: %v", err)
	}
}

var snakeKey = regexp.MustCompile(`^[a-z0-9_]+$`)

// checkSnake fails on any object key of the JSON value v that is not
// snake_case (keys that are data, like column names, are skipped by the
// caller's choice of skip).
func checkSnake(t *testing.T, what string, v any, skip map[string]bool) {
	t.Helper()
	switch x := v.(type) {
	case map[string]any:
		for k, val := range x {
			if !snakeKey.MatchString(k) {
				t.Errorf("%s: key %q is not snake_case", what, k)
			}
			if !skip[k] {
				checkSnake(t, what, val, skip)
			}
		}
	case []any:
		for _, val := range x {
			checkSnake(t, what, val, skip)
		}
	}
}

func TestReportingCommandsHaveJSON(t *testing.T) {
	src := filepath.Join(fmtFixtures, "merged", "data")
	root := t.TempDir()
	for _, p := range []string{"part0", "part1"} {
		copyDir(t, filepath.Join(src, p), filepath.Join(root, p))
	}
	// Maps whose keys are data (formats, compressions, size limits).
	skip := map[string]bool{"formats": true, "compressions": true, "size_limits": true}
	for _, args := range [][]string{
		{"inspect", "--json", "--shards", src},
		{"verify", "--json", src},
		{"merge", "--json", root},
	} {
		out, _, err := runFmtCLI(t, args...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		var v any
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("%v: not JSON: %v\n%s", args, err, out)
		}
		checkSnake(t, args[0], v, skip)
	}
	out, _, err := runFmtCLI(t, "ls", "--json", src)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 9 {
		t.Fatalf("ls --json: %d lines\n%s", len(lines), out)
	}
	for _, l := range lines {
		var v map[string]any
		if err := json.Unmarshal([]byte(l), &v); err != nil || v["key"] == nil || v["size"] == nil {
			t.Fatalf("ls --json line %q: %v", l, err)
		}
		checkSnake(t, "ls", v, nil)
	}
	// verify --json on a broken dataset: exit status 2, problems listed.
	bad := t.TempDir()
	copyDir(t, filepath.Join(fmtFixtures, "fixed_only", "data"), bad)
	if err := os.WriteFile(filepath.Join(bad, "shard.00000.mds"), []byte("short"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err = runFmtCLI(t, "verify", "--json", bad)
	var r verifyReport
	if ExitCode(err) != verifyUnsoundCode || json.Unmarshal([]byte(out), &r) != nil || r.Sound || len(r.Problems) == 0 {
		t.Fatalf("verify --json of a broken dataset: %v\n%s", err, out)
	}
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	ents, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(to, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestHelpListsAcceptedValues(t *testing.T) {
	for cmd, wants := range map[string][]string{
		"plan":   {"py1b", "py1e", "py1br", "naive"},
		"stream": {"py1b", "xxh64", "sha1", "xxh3_128"},
		"cp":     {"auto", "bar", "plain", "none"},
		"write":  {"plain", "xxh64", "zstd"},
	} {
		help, _, err := runFmtCLI(t, cmd, "--help")
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range wants {
			if !strings.Contains(help, w) {
				t.Errorf("%s --help does not list %q", cmd, w)
			}
		}
	}
	if _, _, err := runFmtCLI(t, "cp", "--progress", "plain", filepath.Join(fmtFixtures, "fixed_only", "data"), t.TempDir()); err != nil {
		t.Errorf("cp --progress plain (as convert takes it): %v", err)
	}
}

func TestQuickstartHintNamesNoDeletedDir(t *testing.T) {
	gone := filepath.Join(t.TempDir(), "sluice-quickstart-123")
	h := quickstartHint(gone, false, 10)
	if strings.Contains(h, gone) || !strings.Contains(h, "--dir "+quickstartDemoDir) || !strings.Contains(h, quickstartDemoDir+"/remote") {
		t.Fatalf("hint after removing %s:\n%s", gone, h)
	}
	if h := quickstartHint(gone, true, 10); !strings.Contains(h, "file://"+gone+"/remote") {
		t.Fatalf("hint for a kept dir:\n%s", h)
	}
}

func TestVersionFlag(t *testing.T) {
	out, _, err := runFmtCLI(t, "--version")
	if err != nil || !strings.HasPrefix(out, "sluice "+version.Number()+" (") {
		t.Fatalf("--version: %q %v", out, err)
	}
}

func writeEvents(t *testing.T, out string) []writeEvent {
	t.Helper()
	var evs []writeEvent
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var ev writeEvent
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("event line %q: %v", l, err)
		}
		evs = append(evs, ev)
	}
	return evs
}

func TestWriteCommandEvents(t *testing.T) {
	var body []byte
	body = append(body, writepipe.KindFixed)
	body = binary.LittleEndian.AppendUint32(body, 8)
	for i := range 3 {
		body = binary.LittleEndian.AppendUint64(body, uint64(i))
	}
	stream := writepipe.AppendHeader(nil, writepipe.MagicBatch, 3, uint64(len(body)))
	stream = append(stream, body...)
	stream = writepipe.AppendHeader(stream, writepipe.MagicEnd, 0, 0)
	var out, errb bytes.Buffer
	e := &env{stdout: &out, stderr: &errb, registry: stores.Default()}
	dir := t.TempDir()
	f := &writeFlags{format: "mds", columns: `{"id": "int"}`, hashes: "sha1", sizeLimit: 1 << 26, progress: "none", newline: "\n"}
	if err := runWrite(context.Background(), e, bytes.NewReader(stream), dir, f); err != nil {
		t.Fatal(err)
	}
	evs := writeEvents(t, out.String())
	if evs[0].Event != "ready" || evs[0].Version != version.Number() || evs[len(evs)-1].Event != "done" ||
		evs[len(evs)-1].Samples != 3 || evs[len(evs)-2].File != "index.json" {
		t.Fatalf("events %+v", evs)
	}
	for flag, f := range map[string]*writeFlags{
		"compression": {format: "mds", columns: `{"id": "int"}`, compression: "lz9", progress: "none"},
		"hashes":      {format: "mds", columns: `{"id": "int"}`, hashes: "xxh64,sha1", progress: "none"},
		"columns":     {format: "mds", columns: `{"id": "complex"}`, progress: "none"},
	} {
		out.Reset()
		if err := runWrite(context.Background(), e, bytes.NewReader(nil), t.TempDir(), f); err == nil {
			t.Fatalf("%s: accepted", flag)
		}
		evs := writeEvents(t, out.String())
		if len(evs) != 1 || evs[0].Event != "error" || evs[0].Arg != flag {
			t.Fatalf("%s: events %+v", flag, evs)
		}
	}
}

// convert takes -j/--concurrency as cp does (--workers still works), and
// every key of convert-report.json (and of convert --json) is snake_case.
func TestConvertConcurrencyAndSnakeCaseReport(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	var b bytes.Buffer
	for i := range 50 {
		b.WriteString(`{"id": ` + strings.Repeat("1", 1+i%3) + `, "text": "row"}` + "\n")
	}
	if err := os.WriteFile(in, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	for i, flag := range []string{"-j", "--concurrency", "--workers"} {
		out := filepath.Join(dir, "out"+strings.Repeat("x", i))
		stdout, stderr, err := runFmtCLI(t, "convert", in, out, flag, "2", "--progress", "none", "--json")
		if err != nil {
			t.Fatalf("convert %s 2: %v\n%s", flag, err, stderr)
		}
		report, err := os.ReadFile(filepath.Join(out, "convert-report.json"))
		if err != nil {
			t.Fatal(err)
		}
		for what, text := range map[string]string{"convert-report.json": string(report), "convert --json": stdout} {
			var v any
			if err := json.Unmarshal([]byte(text), &v); err != nil {
				t.Fatalf("%s: %v\n%s", what, err, text)
			}
			checkSnake(t, what, v, map[string]bool{"columns_by_name": true})
		}
	}
	help, _, _ := runFmtCLI(t, "convert", "--help")
	if !strings.Contains(help, "-j, --concurrency") || strings.Contains(help, "--workers ") || !strings.Contains(help, "plain") {
		t.Errorf("convert --help:\n%s", help)
	}
}
