package wds_test

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicedata/sluice/format/wds"
)

func readAll(t testing.TB, b []byte, opts *wds.ReaderOptions) ([]wds.Sample, error) {
	t.Helper()
	r := wds.NewReader(bytes.NewReader(b), opts)
	var out []wds.Sample
	for r.Next() {
		out = append(out, *r.Sample())
	}
	return out, r.Err()
}

func wantTrain() []wds.Sample {
	return []wds.Sample{
		{Key: "train/0001", Fields: map[string][]byte{"cls": []byte("3"), "jpg": []byte("JPEGDATA1"), "seg.png": []byte("PNG1")},
			Order: []string{"cls", "jpg", "seg.png"}},
		{Key: "train/0002", Fields: map[string][]byte{"cls": []byte("7"), "txt": []byte("hello world")},
			Order: []string{"cls", "txt"}},
	}
}

func TestReadGNUAndPAX(t *testing.T) {
	for _, name := range []string{"gnu.tar", "pax.tar"} {
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata", name))
			if err != nil {
				t.Fatal(err)
			}
			got, err := readAll(t, b, nil)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(wantTrain(), got); diff != "" {
				t.Errorf("samples (-want +got):\n%s", diff)
			}
			sh, err := wds.OpenShard(bytes.NewReader(b), int64(len(b)), nil)
			if err != nil {
				t.Fatal(err)
			}
			if sh.Len() != 2 {
				t.Fatalf("Len = %d, want 2", sh.Len())
			}
			for j, want := range wantTrain() {
				s, err := sh.Sample(j)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(want, *s); diff != "" {
					t.Errorf("shard sample %d (-want +got):\n%s", j, diff)
				}
				off, n, err := sh.Span(j)
				if err != nil {
					t.Fatal(err)
				}
				// The span is a self-contained run of tar entries.
				frag := append(append([]byte(nil), b[off:off+n]...), make([]byte, 1024)...)
				one, err := readAll(t, frag, nil)
				if err != nil {
					t.Fatalf("span of sample %d: %v", j, err)
				}
				if diff := cmp.Diff([]wds.Sample{want}, one); diff != "" {
					t.Errorf("span of sample %d (-want +got):\n%s", j, diff)
				}
			}
			if _, err := sh.Sample(2); err == nil {
				t.Error("Sample(2) succeeded on a 2-sample shard")
			}
		})
	}
}

func TestTruncated(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "truncated.tar"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = readAll(t, b, nil)
	var ce *wds.CorruptError
	if !errors.Is(err, wds.ErrCorrupt) || !errors.As(err, &ce) {
		t.Fatalf("err = %v, want a CorruptError", err)
	}
	if ce.Member != "train/0001.jpg" {
		t.Errorf("Member = %q, want train/0001.jpg", ce.Member)
	}
	if _, err := wds.OpenShard(bytes.NewReader(b), int64(len(b)), nil); !errors.Is(err, wds.ErrCorrupt) {
		t.Errorf("OpenShard err = %v, want ErrCorrupt", err)
	}
}

func TestLimits(t *testing.T) {
	var buf bytes.Buffer
	w := wds.NewWriter(&buf)
	if err := w.Write("a", map[string][]byte{"x": make([]byte, 100), "y": make([]byte, 100)}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	for name, opts := range map[string]*wds.ReaderOptions{
		"member": {MaxMemberSize: 99},
		"sample": {MaxSampleSize: 150},
		"fields": {MaxFields: 1},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := readAll(t, buf.Bytes(), opts)
			if !errors.Is(err, wds.ErrCorrupt) {
				t.Fatalf("err = %v, want ErrCorrupt", err)
			}
			if name != "fields" && !errors.Is(err, wds.ErrTooLarge) {
				t.Errorf("err = %v, want ErrTooLarge", err)
			}
		})
	}
}

func TestDuplicateField(t *testing.T) {
	// Two members with the same name in a row: same key, same field.
	var buf bytes.Buffer
	w := wds.NewWriter(&buf)
	if err := w.Write("k", map[string][]byte{"txt": []byte("a")}); err != nil {
		t.Fatal(err)
	}
	if err := w.Write("k", map[string][]byte{"txt": []byte("b")}); err == nil {
		t.Fatal("writer accepted a repeated key")
	}
	raw := buf.Bytes()
	hdr := append([]byte(nil), raw[:1024]...) // header + padded data of k.txt
	dup := append(append(append([]byte(nil), hdr...), hdr...), make([]byte, 1024)...)
	_, err := readAll(t, dup, nil)
	if !errors.Is(err, wds.ErrCorrupt) {
		t.Fatalf("err = %v, want ErrCorrupt for a repeated field", err)
	}
}

func TestWriterRoundTripDeterministic(t *testing.T) {
	samples := []wds.Sample{
		{Key: "s/000", Fields: map[string][]byte{"jpg": []byte{0xff, 0xd8, 1}, "json": []byte(`{"a":1}`)}},
		{Key: "s/001", Fields: map[string][]byte{"jpg": nil, "cls": []byte("12")}},
		{Key: "a-very-long-directory-name/" + string(bytes.Repeat([]byte("x"), 200)), Fields: map[string][]byte{"txt": []byte("long name needs PAX")}},
	}
	write := func() []byte {
		var buf bytes.Buffer
		w := wds.NewWriter(&buf)
		for _, s := range samples {
			if err := w.Write(s.Key, s.Fields); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	a, b := write(), write()
	if !bytes.Equal(a, b) {
		t.Fatal("two writes of the same samples differ")
	}
	got, err := readAll(t, a, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(samples) {
		t.Fatalf("read %d samples, want %d", len(got), len(samples))
	}
	for i := range samples {
		want := samples[i]
		g := got[i]
		if g.Key != want.Key {
			t.Errorf("sample %d key %q, want %q", i, g.Key, want.Key)
		}
		for k, v := range want.Fields {
			if !bytes.Equal(g.Fields[k], v) {
				t.Errorf("sample %d field %q = %q, want %q", i, k, g.Fields[k], v)
			}
		}
		if len(g.Fields) != len(want.Fields) {
			t.Errorf("sample %d has %d fields, want %d", i, len(g.Fields), len(want.Fields))
		}
	}
}

func TestWriterRejects(t *testing.T) {
	for name, c := range map[string]struct {
		key    string
		fields map[string][]byte
	}{
		"dot in key":   {"a.b", map[string][]byte{"x": nil}},
		"dotdot":       {"../a", map[string][]byte{"x": nil}},
		"absolute":     {"/a", map[string][]byte{"x": nil}},
		"empty key":    {"", map[string][]byte{"x": nil}},
		"no fields":    {"a", nil},
		"slash field":  {"a", map[string][]byte{"x/y": nil}},
		"dotted field": {"a", map[string][]byte{".x": nil}},
		"empty field":  {"a", map[string][]byte{"": nil}},
	} {
		t.Run(name, func(t *testing.T) {
			w := wds.NewWriter(&bytes.Buffer{})
			if err := w.Write(c.key, c.fields); err == nil {
				t.Error("Write succeeded")
			}
		})
	}
}

func TestSplitName(t *testing.T) {
	for _, c := range []struct {
		name, key, field string
		ok               bool
	}{
		{"a/b.c.d", "a/b", "c.d", true},
		{"x.jpg", "x", "jpg", true},
		{"a.b/c.d", "a.b/c", "d", true},
		{"noext", "", "", false},
		{".hidden", "", "", false},
		{"trailing.", "trailing", "", true}, // webdataset keeps an empty suffix
		{"a/B.JPG", "a/B", "jpg", true},     // and lowercases it
		{".hidden.jpg", "", "", false},
		// A hidden name in a directory: webdataset's key runs back to the
		// directory ("dir/"), unless its last element has a dot.
		{"dir/.hidden", "dir/", "hidden", true},
		{"a/b/._x.JPG", "a/b/", "_x.jpg", true},
		{"a.b/.hidden", "", "", false},
		{"a.b/c/.h.x", "a.b/c/", "h.x", true},
		{"a//.x", "a//", "x", true},
	} {
		k, f, ok := wds.SplitName(c.name)
		if k != c.key || f != c.field || ok != c.ok {
			t.Errorf("SplitName(%q) = %q, %q, %v; want %q, %q, %v", c.name, k, f, ok, c.key, c.field, c.ok)
		}
	}
}

// TestHiddenNamesInDirectories reads names whose base starts with a dot
// through every reader (sequential, indexed from a ReaderAt, indexed in
// memory, scanned): webdataset yields "dir/.hidden" as a sample keyed
// "dir/" (macOS tar's "dir/._x.jpg" AppleDouble files among them); Sluice
// used to skip it, so a dataset had fewer samples than webdataset reads.
func TestHiddenNamesInDirectories(t *testing.T) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, m := range []struct{ name, data string }{
		{"dir/a.jpg", "A"},
		{"dir/._a.jpg", "apple"},
		{".top.jpg", "skipped"},
		{"x.y/.h", "skipped"},
		{"dir/b.txt", "B"},
		{"dir/.meta", "m"},
	} {
		if err := tw.WriteHeader(&tar.Header{Name: m.name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(m.data))}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(m.data))
	}
	tw.Close()
	b := buf.Bytes()
	want := []struct{ key, field, data string }{
		{"dir/a", "jpg", "A"}, {"dir/", "_a.jpg", "apple"}, {"dir/b", "txt", "B"}, {"dir/", "meta", "m"},
	}
	check := func(how string, n int, sample func(int) (*wds.Sample, error)) {
		t.Helper()
		if n != len(want) {
			t.Fatalf("%s: %d samples, want %d", how, n, len(want))
		}
		for j, w := range want {
			s, err := sample(j)
			if err != nil {
				t.Fatalf("%s: sample %d: %v", how, j, err)
			}
			if s.Key != w.key || len(s.Fields) != 1 || string(s.Fields[w.field]) != w.data {
				t.Errorf("%s: sample %d = %q %v, want %q {%s: %s}", how, j, s.Key, s.Order, w.key, w.field, w.data)
			}
		}
	}
	var seq []*wds.Sample
	r := wds.NewReader(bytes.NewReader(b), nil)
	for r.Next() {
		s := *r.Sample()
		seq = append(seq, &s)
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	check("Reader", len(seq), func(j int) (*wds.Sample, error) { return seq[j], nil })
	sh, err := wds.OpenShard(bytes.NewReader(b), int64(len(b)), nil)
	if err != nil {
		t.Fatal(err)
	}
	check("OpenShard", sh.Len(), sh.Sample)
	if sh, err = wds.OpenShardBytes(b, nil); err != nil {
		t.Fatal(err)
	}
	check("OpenShardBytes", sh.Len(), sh.Sample)
	sum, err := wds.Scan(bytes.NewReader(b), nil)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Samples != len(want) {
		t.Errorf("Scan: %d samples, want %d", sum.Samples, len(want))
	}
}

func BenchmarkReader(b *testing.B) {
	var buf bytes.Buffer
	w := wds.NewWriter(&buf)
	img := bytes.Repeat([]byte{7}, 20<<10)
	for i := range 256 {
		key := "s" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		if err := w.Write(key, map[string][]byte{"jpg": img, "cls": []byte("1")}); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	data := buf.Bytes()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		r := wds.NewReader(bytes.NewReader(data), nil)
		n := 0
		for r.Next() {
			n++
		}
		if r.Err() != nil || n != 256 {
			b.Fatal(n, r.Err())
		}
	}
}

// basePlusExt is webdataset's base_plus_ext pattern in Go's regexp, whose
// submatches are those of a backtracking engine; the optional newline
// makes "$" match as Python's does, before a final newline too.
var basePlusExt = regexp.MustCompile(`^((?:.*/|)[^.]+)[.]([^/]*)\n?$`)

// FuzzSplitName checks SplitName against webdataset's pattern on any
// UTF-8 name (Sluice refuses the others before splitting).
func FuzzSplitName(f *testing.F) {
	for _, s := range []string{"a/b.c.d", ".h", "dir/.h", "a.b/.h", "a.b/c/.h.x", "a//.x", "/.x", "x.", "a\nb/c.x/d.e", "a.b\n", "a\n/.b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if !utf8.ValidString(name) {
			return
		}
		key, field, ok := wds.SplitName(name)
		m := basePlusExt.FindStringSubmatch(name)
		if m == nil {
			if ok {
				t.Fatalf("SplitName(%q) = %q, %q; webdataset skips it", name, key, field)
			}
			return
		}
		// The regexp's group 2 stops before a final newline that Python's
		// greedy [^/]* would take.
		wantField := name[len(m[1])+1:]
		if !ok || key != m[1] || field != strings.ToLower(wantField) {
			t.Fatalf("SplitName(%q) = %q, %q, %v; webdataset: %q, %q", name, key, field, ok, m[1], wantField)
		}
	})
}
