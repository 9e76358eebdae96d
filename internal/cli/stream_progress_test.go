package cli

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/mds"
)

// writeProgressDataset writes n samples of about 100 bytes in shards of
// 16 KB under dir.
func writeProgressDataset(t *testing.T, dir string, n int) {
	t.Helper()
	w, err := mds.NewWriter(dir, &mds.WriterOptions{Columns: map[string]string{"id": "int", "text": "str"}, SizeLimit: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := w.Write(format.Sample{"id": int64(i), "text": strings.Repeat(fmt.Sprint(i%10), 90)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
}

var progressLineRE = regexp.MustCompile(`(?m)^stream: (\d+) / \d+ samples, \d+ samples/s, [0-9.]+ [KMG]?i?B; cache: (\d+) hits, (\d+) misses, (\d+) downloads \(.* fetched\)$`)

// `sluice stream --progress plain` prints periodic lines on stderr with
// the samples so far, the rate, the bytes and the cache figures, and a
// last line at the end; --progress none and --json print none; a bad
// value is refused.
func TestStreamProgressLines(t *testing.T) {
	dir := t.TempDir()
	remote := filepath.Join(dir, "remote")
	writeProgressDataset(t, remote, 2000)
	run := func(args ...string) (string, string, error) {
		var out, errOut bytes.Buffer
		args = append([]string{"stream", "file://" + remote, "--local", filepath.Join(dir, "cache-"+strconv.Itoa(len(args)))}, args...)
		err := Run(context.Background(), args, &out, &errOut)
		return out.String(), errOut.String(), err
	}
	_, stderr, err := run("--progress", "plain", "--progress-interval", "1ns")
	if err != nil {
		t.Fatalf("stream: %v\n%s", err, stderr)
	}
	lines := progressLineRE.FindAllStringSubmatch(stderr, -1)
	if len(lines) < 3 {
		t.Fatalf("want periodic progress lines, got:\n%s", stderr)
	}
	prev := int64(-1)
	for _, m := range lines {
		n, _ := strconv.ParseInt(m[1], 10, 64)
		if n < prev {
			t.Fatalf("progress went back from %d to %d:\n%s", prev, n, stderr)
		}
		prev = n
	}
	last := lines[len(lines)-1]
	if last[1] != "2000" || last[4] == "0" {
		t.Fatalf("last line %q: want 2000 samples and some downloads", last[0])
	}

	// Not a terminal: auto prints lines (here only the last one, as the
	// run is shorter than the default interval).
	if _, stderr, err = run(); err != nil || len(progressLineRE.FindAllString(stderr, -1)) == 0 {
		t.Fatalf("auto: %v, stderr:\n%s", err, stderr)
	}
	for _, args := range [][]string{{"--progress", "none", "--progress-interval", "1ns"}, {"--json", "--progress", "plain", "--progress-interval", "1ns"}} {
		stdout, stderr, err := run(args...)
		if err != nil || strings.Contains(stderr, "stream: ") {
			t.Fatalf("%v: %v, stderr:\n%s", args, err, stderr)
		}
		if args[0] == "--json" && !strings.HasPrefix(strings.TrimSpace(stdout), "{") {
			t.Fatalf("--json output is not JSON: %q", stdout)
		}
	}
	if _, _, err := run("--progress", "fancy"); err == nil || !strings.Contains(err.Error(), "--progress must be") {
		t.Fatalf("--progress fancy: %v", err)
	}
}
