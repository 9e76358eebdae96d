package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/jsonl"
	"github.com/sluicedata/sluice/format/mds"
	"github.com/sluicedata/sluice/format/xsv"
	"github.com/sluicedata/sluice/internal/stores"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/filestore"
	"github.com/sluicedata/sluice/storage/memstore"
)

// keepOpen hides Close from the command, so a test can look into the
// bucket after the command has closed its stack of decorators.
type keepOpen struct{ storage.Bucket }

func (keepOpen) Close() error { return nil }

// memRegistry returns the default registry plus the scheme "mem" opening
// b, so that commands read a dataset held in memory as they would one in
// a remote store.
func memRegistry(b storage.Bucket) *storage.Registry {
	r := stores.Default()
	r.Register("mem", func(context.Context, *url.URL) (storage.Bucket, error) { return keepOpen{b}, nil })
	return r
}

// runWith runs the command line with the registry r.
func runWith(t *testing.T, r *storage.Registry, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	e := &env{stdout: &out, stderr: &errb, registry: r}
	root := newRootCommand(e)
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&errb)
	err := root.ExecuteContext(context.Background())
	return out.String(), errb.String(), err
}

// toMem copies the local directory dir into a new memory bucket.
func toMem(t testing.TB, dir string) *memstore.Bucket {
	t.Helper()
	src, err := filestore.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst := memstore.New("test")
	if _, err := storage.CopyTree(context.Background(), src, dst, nil); err != nil {
		t.Fatal(err)
	}
	return dst
}

// noFetchLeftovers points the temporary directory at a fresh one and
// checks, at the end of the test, that the commands left nothing there.
func noFetchLeftovers(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	t.Cleanup(func() {
		ents, _ := os.ReadDir(tmp)
		for _, e := range ents {
			t.Errorf("left behind in the temporary directory: %s", e.Name())
		}
	})
}

// writeMixed writes one dataset whose index mixes mds, json and csv shards
// (three sub-datasets, merged) and returns its directory and, per
// sub-dataset, its directory name.
func writeMixed(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	// mds, zstd, three small shards.
	mw, err := mds.NewWriter(filepath.Join(root, "0"), &mds.WriterOptions{
		Columns: map[string]string{"id": "int", "txt": "str", "blob": "bytes"}, Compression: "zstd", Hashes: []string{"sha1"}, SizeLimit: 300})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		if err := mw.Write(format.Sample{"id": int64(i), "txt": fmt.Sprint("mds ", i), "blob": []byte{byte(i), 1, 2}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := mw.Finish(); err != nil {
		t.Fatal(err)
	}
	cols := map[string]string{"s": "str", "x": "int", "y": "float"}
	jw, err := jsonl.NewWriter(filepath.Join(root, "1"), &jsonl.WriterOptions{Columns: cols, Compression: "gz", Hashes: []string{"sha1"}, SizeLimit: 200})
	if err != nil {
		t.Fatal(err)
	}
	xw, err := xsv.NewWriter(filepath.Join(root, "2"), &xsv.WriterOptions{Format: "csv", Columns: cols, SizeLimit: 200})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 15; i++ {
		s := format.Sample{"s": fmt.Sprint("row ", i), "x": int64(i), "y": float64(i) / 8}
		if err := jw.Write(s); err != nil {
			t.Fatal(err)
		}
		if err := xw.Write(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := jw.Finish(); err != nil {
		t.Fatal(err)
	}
	if err := xw.Finish(); err != nil {
		t.Fatal(err)
	}
	if _, stderr, err := runFmtCLI(t, "merge", root); err != nil {
		t.Fatalf("merge: %v %s", err, stderr)
	}
	return root
}

var dumpTail = regexp.MustCompile(`"i": (\d+), "shard": (\d+)}$`)

// shiftDump renumbers the lines of a sub-dataset's dump as lines of a
// dataset in which it starts at sample i0 and shard k0.
func shiftDump(t *testing.T, dump string, i0, k0 int) []string {
	t.Helper()
	var out []string
	for _, l := range strings.Split(strings.TrimSuffix(dump, "\n"), "\n") {
		m := dumpTail.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("bad dump line %q", l)
		}
		i, _ := strconv.Atoi(m[1])
		k, _ := strconv.Atoi(m[2])
		out = append(out, l[:len(l)-len(m[0])]+fmt.Sprintf(`"i": %d, "shard": %d}`, i+i0, k+k0))
	}
	return out
}

// TestDumpMixedFormats dumps an index that mixes mds, json and csv shards:
// every sample in global order, each shard in its own format's canonical
// form (the same lines as each sub-dataset alone, renumbered).
func TestDumpMixedFormats(t *testing.T) {
	root := writeMixed(t)
	b, err := os.ReadFile(filepath.Join(root, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	idx, err := format.ParseIndex(b)
	if err != nil {
		t.Fatal(err)
	}
	formats := map[string]bool{}
	for _, s := range idx.Shards {
		formats[s.Format] = true
	}
	if len(formats) != 3 || idx.Samples() != 50 {
		t.Fatalf("mixed dataset has formats %v and %d samples", formats, idx.Samples())
	}
	var want []string
	i0, k0 := 0, 0
	for _, sub := range []string{"0", "1", "2"} {
		out, stderr, err := runFmtCLI(t, "dump", filepath.Join(root, sub))
		if err != nil {
			t.Fatalf("dump %s: %v %s", sub, err, stderr)
		}
		lines := shiftDump(t, out, i0, k0)
		want = append(want, lines...)
		sb, _ := os.ReadFile(filepath.Join(root, sub, "index.json"))
		si, _ := format.ParseIndex(sb)
		i0 += len(lines)
		k0 += len(si.Shards)
	}
	all, stderr, err := runFmtCLI(t, "dump", root)
	if err != nil {
		t.Fatalf("dump: %v %s", err, stderr)
	}
	if got := strings.Split(strings.TrimSuffix(all, "\n"), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("mixed dump differs from the sub-datasets' dumps:\n%s", all)
	}
	if !strings.Contains(all, `"v": "row 3"`) || !strings.Contains(all, `"v": "mds 3"`) {
		t.Errorf("dump lacks values of some format:\n%s", all)
	}
	// A window that starts in the mds part and ends in the csv part.
	part, _, err := runFmtCLI(t, "dump", root, "--from", "18", "--count", "20")
	if err != nil {
		t.Fatal(err)
	}
	if part != strings.Join(want[18:38], "\n")+"\n" {
		t.Errorf("--from 18 --count 20 gave\n%s", part)
	}
	// The same through a store, fetched shard by shard.
	noFetchLeftovers(t)
	mem := toMem(t, root)
	got, stderr, err := runWith(t, memRegistry(mem), "dump", "mem://mixed")
	if err != nil || got != all {
		t.Fatalf("dump through a store: %v %s\n%s", err, stderr, got)
	}
	got, _, err = runWith(t, memRegistry(mem), "dump", "mem://mixed", "--from", "18", "--count", "20")
	if err != nil || got != part {
		t.Fatalf("windowed dump through a store: %v\n%s", err, got)
	}
	out, stderr, err := runWith(t, memRegistry(mem), "verify", "mem://mixed")
	if err != nil || !strings.Contains(out, "50 samples") || !strings.Contains(out, ": 0 problems") {
		t.Fatalf("verify through a store: %v\n%s%s", err, out, stderr)
	}
}

// TestDumpUnknownFormat refuses a shard of a format it cannot read, naming it.
func TestDumpUnknownFormat(t *testing.T) {
	dir := t.TempDir()
	// (wds shards are dumped since WebDataset support; lance never is.)
	idx := &format.Index{Shards: []format.ShardInfo{{Format: "lance", Version: 2, Samples: 1,
		RawData: format.FileInfo{Basename: "shard.00000.lance", Bytes: 10}}}}
	if err := os.WriteFile(filepath.Join(dir, "index.json"), format.AppendIndex(nil, idx), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := runFmtCLI(t, "dump", dir)
	if !errors.Is(err, format.ErrCorrupt) || !strings.Contains(err.Error(), `unknown shard format "lance"`) {
		t.Fatalf("dump of a lance shard: %v", err)
	}
}

// TestFormatCommandsFileURL reads a dataset through a file:// URL.
func TestFormatCommandsFileURL(t *testing.T) {
	src := filepath.Join(fmtFixtures, "mixed_gz", "data")
	want, err := os.ReadFile(filepath.Join(fmtFixtures, "mixed_gz", "expected.jsonl"))
	if err != nil {
		t.Skip("fixture missing")
	}
	abs, err := filepath.Abs(src)
	if err != nil {
		t.Fatal(err)
	}
	u := (&url.URL{Scheme: "file", Path: abs}).String()
	out, stderr, err := runFmtCLI(t, "dump", u)
	if err != nil || out != string(want) {
		t.Fatalf("dump %s: %v %s", u, err, stderr)
	}
	out, _, err = runFmtCLI(t, "inspect", u)
	if err != nil || !strings.Contains(out, "0 missing, 0 of another size") {
		t.Fatalf("inspect %s: %v\n%s", u, err, out)
	}
	if out, _, err = runFmtCLI(t, "verify", u); err != nil || !strings.Contains(out, ": 0 problems") {
		t.Fatalf("verify %s: %v\n%s", u, err, out)
	}
}

// TestFormatCommandsHTTP inspects and dumps fixtures served over HTTP.
func TestFormatCommandsHTTP(t *testing.T) {
	if _, err := os.Stat(fmtFixtures); err != nil {
		t.Skip("fixtures not available")
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(fmtFixtures)))
	defer srv.Close()
	noFetchLeftovers(t)
	for _, name := range []string{"mixed_zstd", "merged", "text_bytes_json"} {
		want, err := os.ReadFile(filepath.Join(fmtFixtures, name, "expected.jsonl"))
		if err != nil {
			t.Skip("fixture missing")
		}
		u := srv.URL + "/" + name + "/data"
		out, stderr, err := runFmtCLI(t, "dump", u)
		if err != nil || out != string(want) {
			t.Fatalf("dump %s: %v %s", u, err, stderr)
		}
		local, _, err := runFmtCLI(t, "inspect", filepath.Join(fmtFixtures, name, "data"), "--shards")
		if err != nil {
			t.Fatal(err)
		}
		out, _, err = runFmtCLI(t, "inspect", u, "--shards")
		if err != nil || !strings.Contains(out, "0 missing, 0 of another size") {
			t.Fatalf("inspect %s: %v\n%s", u, err, out)
		}
		// Everything but the first line (the dataset's name) agrees.
		if strings.SplitN(out, "\n", 2)[1] != strings.SplitN(local, "\n", 2)[1] {
			t.Errorf("inspect over HTTP differs from the local one:\n%s\n%s", out, local)
		}
		if out, _, err = runFmtCLI(t, "verify", u); err != nil || !strings.Contains(out, ": 0 problems") {
			t.Fatalf("verify %s: %v\n%s", u, err, out)
		}
	}
	if _, _, err := runFmtCLI(t, "merge", srv.URL+"/merged/data"); err == nil || !strings.Contains(err.Error(), "cannot list") {
		t.Errorf("merge over HTTP: %v", err)
	}
}

// TestVerifyRemoteProblems damages a dataset held in a store and checks
// that verify names every problem, fetches nothing it leaves behind, and
// that inspect reports the missing and the changed file without reading
// shards.
func TestVerifyRemoteProblems(t *testing.T) {
	src := filepath.Join(fmtFixtures, "text_bytes_json", "data")
	if _, err := os.Stat(src); err != nil {
		t.Skip("fixture missing")
	}
	noFetchLeftovers(t)
	mem := toMem(t, src)
	ctx := context.Background()
	b, err := storage.ReadAll(ctx, mem, "shard.00001.mds.zstd", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-3] ^= 0xff
	if err := storage.Upload(ctx, mem, "shard.00001.mds.zstd", bytes.NewReader(b), int64(len(b)), nil); err != nil {
		t.Fatal(err)
	}
	b, _ = storage.ReadAll(ctx, mem, "shard.00000.mds.zstd", 1<<20)
	b = b[:len(b)-10]
	if err := storage.Upload(ctx, mem, "shard.00000.mds.zstd", bytes.NewReader(b), int64(len(b)), nil); err != nil {
		t.Fatal(err)
	}
	if err := mem.Delete(ctx, "shard.00002.mds.zstd"); err != nil {
		t.Fatal(err)
	}
	r := memRegistry(mem)
	_, stderr, err := runWith(t, r, "verify", "mem://mixed")
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != verifyUnsoundCode || !strings.Contains(err.Error(), "3 problems") {
		t.Fatalf("want exit %d with 3 problems, got %v\n%s", verifyUnsoundCode, err, stderr)
	}
	for _, want := range []string{`"shard.00000.mds.zstd": shard 0: file has`, `"shard.00001.mds.zstd": shard 1: xxh64 digest`, `"shard.00002.mds.zstd": shard 2: file is missing`} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	out, _, err := runWith(t, r, "inspect", "mem://mixed", "--shards")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"1 missing, 1 of another size", "missing shard.00002.mds.zstd", "shard.00000.mds.zstd has"} {
		if !strings.Contains(out, want) {
			t.Errorf("inspect lacks %q:\n%s", want, out)
		}
	}
	out, _, err = runWith(t, r, "inspect", "mem://mixed", "--no-stat")
	if err != nil || strings.Contains(out, "in store") {
		t.Errorf("inspect --no-stat: %v\n%s", err, out)
	}
	// dump stops at the first damaged shard with an error naming it.
	if _, _, err := runWith(t, r, "dump", "mem://mixed"); err == nil || !strings.Contains(err.Error(), "shard.00000.mds.zstd") {
		t.Errorf("dump of a truncated shard: %v", err)
	}
}

// TestMergeRemote merges sub-dataset indexes held in a store into the
// same index.json MosaicML wrote for the fixture.
func TestMergeRemote(t *testing.T) {
	src := filepath.Join(fmtFixtures, "merged", "data")
	want, err := os.ReadFile(filepath.Join(src, "index.json"))
	if err != nil {
		t.Skip("fixture missing")
	}
	mem := toMem(t, src)
	ctx := context.Background()
	if err := mem.Delete(ctx, "index.json"); err != nil {
		t.Fatal(err)
	}
	r := memRegistry(mem)
	out, stderr, err := runWith(t, r, "merge", "mem://merged")
	if err != nil || !strings.Contains(out, "merged 5 shards, 51 samples") {
		t.Fatalf("merge: %v %s\n%s", err, stderr, out)
	}
	got, err := storage.ReadAll(ctx, mem, "index.json", 1<<20)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("merged index differs from MosaicML's: %v\n%s", err, got)
	}
	exp, _ := os.ReadFile(filepath.Join(fmtFixtures, "merged", "expected.jsonl"))
	if dump, _, err := runWith(t, r, "dump", "mem://merged"); err != nil || dump != string(exp) {
		t.Errorf("dump of the merged store dataset: %v", err)
	}
	// A sub-index that does not parse is named.
	bad := []byte(`{"version": 2, "shards": [{"format": "mds"}]}`)
	if err := storage.Upload(ctx, mem, "part1/index.json", bytes.NewReader(bad), int64(len(bad)), nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runWith(t, r, "merge", "mem://merged"); !errors.Is(err, format.ErrCorrupt) || !strings.Contains(err.Error(), "part1/index.json") {
		t.Errorf("merge with a bad sub-index: %v", err)
	}
	empty := memstore.New("empty")
	if _, _, err := runWith(t, memRegistry(empty), "merge", "mem://empty"); err == nil || !strings.Contains(err.Error(), "no sub-dataset") {
		t.Errorf("merge of an empty store: %v", err)
	}
}

// denyKey refuses reads of one key, as a store refusing access would.
type denyKey struct {
	storage.Bucket
	key string
}

func (d denyKey) NewRangeReader(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if key == d.key {
		return nil, fmt.Errorf("read %s: %w", key, fs.ErrPermission)
	}
	return d.Bucket.NewRangeReader(ctx, key, off, n)
}

// TestRemoteFetchFailure checks that a shard that cannot be fetched stops
// verify and dump with an error naming it (not a "problem" of the data),
// leaving no temporary files.
func TestRemoteFetchFailure(t *testing.T) {
	src := filepath.Join(fmtFixtures, "mixed_zstd", "data")
	if _, err := os.Stat(src); err != nil {
		t.Skip("fixture missing")
	}
	noFetchLeftovers(t)
	r := memRegistry(denyKey{toMem(t, src), "shard.00003.mds.zstd"})
	for _, cmd := range []string{"verify", "dump"} {
		_, _, err := runWith(t, r, cmd, "mem://x")
		var ee *ExitError
		if err == nil || errors.As(err, &ee) || !errors.Is(err, fs.ErrPermission) || !strings.Contains(err.Error(), "shard.00003.mds.zstd") {
			t.Errorf("%s: %v", cmd, err)
		}
	}
}

// TestEachShardCancel stops a remote walk midway by cancelling its context:
// the walk returns the cancellation, and every fetched file is gone.
func TestEachShardCancel(t *testing.T) {
	src := filepath.Join(fmtFixtures, "mixed_zstd", "data")
	if _, err := os.Stat(src); err != nil {
		t.Skip("fixture missing")
	}
	noFetchLeftovers(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e := &env{stdout: io.Discard, stderr: io.Discard, registry: memRegistry(toMem(t, src))}
	d, err := openDataset(ctx, e, "mem://x")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	idx, err := d.readIndex(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var seen []int
	err = d.eachShard(ctx, idx, 1, len(idx.Shards), func(k int, dir string, fetchErr error) error {
		if fetchErr != nil {
			return fetchErr
		}
		for _, f := range idx.Shards[k].Files() {
			if _, err := os.Stat(filepath.Join(dir, f.Basename)); err != nil {
				t.Errorf("shard %d: %v", k, err)
			}
		}
		seen = append(seen, k)
		if len(seen) == 2 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) || fmt.Sprint(seen) != "[1 2]" {
		t.Fatalf("walk gave %v after shards %v", err, seen)
	}
}
