package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/jsonl"
	"github.com/sluicedata/sluice/format/xsv"
)

const fmtFixtures = "../../../shared/fixtures/mds"

func runFmtCLI(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := Run(context.Background(), args, &out, &errb)
	return out.String(), errb.String(), err
}

func fmtFixtureDirs(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir(fmtFixtures)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("fixtures not available: %v", err) // CI always has ../shared beside the clone
		}
		t.Skipf("fixtures not available: %v", err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestDumpFixtures checks that sluice dump prints exactly expected.jsonl for
// every fixture without images (JPEG pixels differ by decoder and pkl
// cannot be unpickled; those datasets are compared field by field in
// format/mds).
func TestDumpFixtures(t *testing.T) {
	exact := 0
	for _, name := range fmtFixtureDirs(t) {
		want, err := os.ReadFile(filepath.Join(fmtFixtures, name, "expected.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		out, stderr, err := runFmtCLI(t, "dump", filepath.Join(fmtFixtures, name, "data"))
		if err != nil {
			t.Fatalf("%s: %v (%s)", name, err, stderr)
		}
		if bytes.Contains(want, []byte(`"JPEG"`)) || bytes.Contains(want, []byte(`{"pkl":`)) {
			// Every column's bytes must still be exactly what MosaicML read.
			re := regexp.MustCompile(`"raw_(len|sha256)": [^,]*`)
			if g, w := re.FindAllString(out, -1), re.FindAllString(string(want), -1); strings.Join(g, "|") != strings.Join(w, "|") || len(w) == 0 {
				t.Errorf("%s: raw column bytes differ from expected.jsonl", name)
			}
			continue
		}
		if out != string(want) {
			t.Errorf("%s: dump differs from expected.jsonl", name)
		}
		exact++
	}
	if exact < 10 {
		t.Fatalf("only %d fixtures compared exactly", exact)
	}
}

func TestDumpRange(t *testing.T) {
	dir := filepath.Join(fmtFixtures, "mixed_zstd", "data")
	if _, err := os.Stat(dir); err != nil {
		t.Skip("fixture missing")
	}
	all, _, err := runFmtCLI(t, "dump", dir)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(all, "\n")
	part, _, err := runFmtCLI(t, "dump", dir, "--from", "5", "--count", "3")
	if err != nil {
		t.Fatal(err)
	}
	if part != strings.Join(lines[5:8], "") {
		t.Fatalf("--from 5 --count 3 gave\n%s", part)
	}
	if out, _, err := runFmtCLI(t, "dump", dir, "--from", "1000"); err != nil || out != "" {
		t.Fatalf("past the end: %q, %v", out, err)
	}
}

func TestInspect(t *testing.T) {
	dir := filepath.Join(fmtFixtures, "merged", "data")
	if _, err := os.Stat(dir); err != nil {
		t.Skip("fixture missing")
	}
	out, _, err := runFmtCLI(t, "inspect", dir, "--shards")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"samples       51", "shards        5 (0 empty)", "compression   zstd", "hashes        sha1", "merged index", "part2/shard.00001.mds.zstd"} {
		if !strings.Contains(out, want) {
			t.Errorf("inspect output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(strings.Join(strings.Fields(out), " "), "payload bytes") {
		t.Errorf("inspect output lacks the payload column:\n%s", out)
	}
	if _, _, err := runFmtCLI(t, "inspect", t.TempDir()); err == nil {
		t.Error("inspect of an empty directory succeeded")
	}
	if _, _, err := runFmtCLI(t, "inspect", "nosuch://bucket/x"); err == nil || !strings.Contains(err.Error(), `unsupported scheme "nosuch"`) {
		t.Errorf("unknown scheme: %v", err)
	}
}

func fmtCopyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if fi.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestVerify(t *testing.T) {
	for _, name := range fmtFixtureDirs(t) {
		out, stderr, err := runFmtCLI(t, "verify", filepath.Join(fmtFixtures, name, "data"))
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, stderr)
		}
		if !strings.Contains(out, ": 0 problems") {
			t.Errorf("%s: %s", name, out)
		}
	}
	src := filepath.Join(fmtFixtures, "scalars", "data")
	if _, err := os.Stat(src); err != nil {
		t.Skip("fixture missing")
	}
	cases := []struct {
		name   string
		break_ func(dir string)
		want   string
	}{
		{"flipped byte", func(dir string) {
			p := filepath.Join(dir, "shard.00001.mds")
			b, _ := os.ReadFile(p)
			b[len(b)-3] ^= 0xff
			os.WriteFile(p, b, 0o644)
		}, `"shard.00001.mds": shard 1: sha1 digest`},
		{"truncated", func(dir string) {
			p := filepath.Join(dir, "shard.00000.mds")
			b, _ := os.ReadFile(p)
			os.WriteFile(p, b[:len(b)-10], 0o644)
		}, `"shard.00000.mds": shard 0: file has`},
		{"missing", func(dir string) {
			os.Remove(filepath.Join(dir, "shard.00001.mds"))
		}, `"shard.00001.mds": shard 1: file is missing`},
	}
	for _, c := range cases {
		dir := t.TempDir()
		fmtCopyDir(t, src, dir)
		c.break_(dir)
		_, stderr, err := runFmtCLI(t, "verify", dir)
		var ee *ExitError
		if !errors.As(err, &ee) || ee.Code != verifyUnsoundCode {
			t.Fatalf("%s: want exit %d, got %v", c.name, verifyUnsoundCode, err)
		}
		if !strings.Contains(stderr, c.want) {
			t.Errorf("%s: stderr %q lacks %q", c.name, stderr, c.want)
		}
	}
}

// TestVerifyBadSample corrupts a sample's contents while keeping the file
// digests consistent, so that only decoding can find the problem.
func TestVerifyBadSample(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(fmtFixtures, "single_shard_no_limit", "data")
	if _, err := os.Stat(src); err != nil {
		t.Skip("fixture missing")
	}
	fmtCopyDir(t, src, dir)
	// Drop the hashes so only the decoder can notice.
	ib, _ := os.ReadFile(filepath.Join(dir, "index.json"))
	i := bytes.Index(ib, []byte(`"hashes": {"sha1": "`))
	ib = append(ib[:i+len(`"hashes": {`)], ib[i+len(`"hashes": {"sha1": "`)+41:]...)
	os.WriteFile(filepath.Join(dir, "index.json"), ib, 0o644)
	p := filepath.Join(dir, "shard.00000.mds")
	b, _ := os.ReadFile(p)
	// Make the last sample's str column invalid UTF-8.
	b[len(b)-1] = 0xff
	os.WriteFile(p, b, 0o644)
	_, stderr, err := runFmtCLI(t, "verify", dir)
	if err == nil {
		t.Fatal("verify passed a corrupt sample")
	}
	if !strings.Contains(stderr, "sample 23") || !strings.Contains(stderr, `column "text"`) {
		t.Errorf("stderr %q does not name the sample and column", stderr)
	}
}

func TestMergeCommand(t *testing.T) {
	src := filepath.Join(fmtFixtures, "merged", "data")
	want, err := os.ReadFile(filepath.Join(src, "index.json"))
	if err != nil {
		t.Skip("fixture missing")
	}
	dir := t.TempDir()
	fmtCopyDir(t, src, dir)
	os.Remove(filepath.Join(dir, "index.json"))
	out, _, err := runFmtCLI(t, "merge", dir)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "merged 5 shards, 51 samples") {
		t.Errorf("output %q", out)
	}
	got, _ := os.ReadFile(filepath.Join(dir, "index.json"))
	if !bytes.Equal(got, want) {
		t.Error("merged index differs from MosaicML's")
	}
	// The merged dataset dumps the same lines as the fixture's expected.
	dump, _, err := runFmtCLI(t, "dump", dir)
	if err != nil {
		t.Fatal(err)
	}
	exp, _ := os.ReadFile(filepath.Join(fmtFixtures, "merged", "expected.jsonl"))
	sc := bufio.NewScanner(strings.NewReader(dump))
	n := 0
	for sc.Scan() {
		n++
	}
	if dump != string(exp) || n != 51 {
		t.Errorf("dump of the merged dataset differs (%d lines)", n)
	}
}

// TestVerifySplitFormats verifies JSON-lines and CSV datasets, sound and
// with a damaged data file.
func TestVerifySplitFormats(t *testing.T) {
	for _, f := range []string{"json", "csv"} {
		dir := t.TempDir()
		cols := map[string]string{"s": "str", "x": "int", "y": "float"}
		var write func(format.Sample) error
		var finish func() error
		if f == "json" {
			w, err := jsonl.NewWriter(dir, &jsonl.WriterOptions{Columns: cols, Compression: "gz", Hashes: []string{"sha1"}, SizeLimit: 200})
			if err != nil {
				t.Fatal(err)
			}
			write, finish = w.Write, w.Finish
		} else {
			w, err := xsv.NewWriter(dir, &xsv.WriterOptions{Format: "csv", Columns: cols, Hashes: []string{"sha1"}, SizeLimit: 200})
			if err != nil {
				t.Fatal(err)
			}
			write, finish = w.Write, w.Finish
		}
		for i := 0; i < 30; i++ {
			if err := write(format.Sample{"s": "row", "x": int64(i), "y": float64(i) / 4}); err != nil {
				t.Fatal(err)
			}
		}
		if err := finish(); err != nil {
			t.Fatal(err)
		}
		out, stderr, err := runFmtCLI(t, "verify", dir)
		if err != nil || !strings.Contains(out, "30 samples") || !strings.Contains(out, ": 0 problems") {
			t.Fatalf("%s: %v\n%s%s", f, err, out, stderr)
		}
		// Damage the second shard's stored data file.
		b, _ := os.ReadFile(filepath.Join(dir, "index.json"))
		idx, err := format.ParseIndex(b)
		if err != nil || len(idx.Shards) < 2 {
			t.Fatalf("%s: %v, %d shards", f, err, len(idx.Shards))
		}
		p := filepath.Join(dir, idx.Shards[1].Files()[0].Basename)
		data, _ := os.ReadFile(p)
		data[len(data)/2] ^= 0x20
		os.WriteFile(p, data, 0o644)
		_, stderr, err = runFmtCLI(t, "verify", dir)
		var ee *ExitError
		if !errors.As(err, &ee) || !strings.Contains(stderr, "shard 1: checksum failure: sha1") {
			t.Errorf("%s: damaged file: %v\n%s", f, err, stderr)
		}
	}
}
