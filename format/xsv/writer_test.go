package xsv_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/compress"
	"github.com/sluicedata/sluice/format/xsv"
)

// meta builds the expected meta file by hand: u32 count, u32 offsets,
// config text.
func meta(offsets []uint32, cfg string) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(len(offsets)-1))
	for _, o := range offsets {
		b = binary.LittleEndian.AppendUint32(b, o)
	}
	return append(b, cfg...)
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func write(t *testing.T, opts *xsv.WriterOptions, samples []format.Sample) string {
	t.Helper()
	dir := t.TempDir()
	w, err := xsv.NewWriter(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range samples {
		if err := w.Write(s); err != nil {
			t.Fatalf("sample %d: %v", i, err)
		}
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func readIndex(t *testing.T, dir string) *format.Index {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	idx, err := format.ParseIndex(b)
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

// TestWriterSpecExamples writes the example of spec section 7.2 in each
// format and compares every file with bytes derived by hand from the
// spec's rules.
func TestWriterSpecExamples(t *testing.T) {
	samples := []format.Sample{{"x": 1, "s": "a"}, {"x": int64(2), "s": "b", "extra": 1.5}}
	cases := []struct {
		opts    xsv.WriterOptions
		name    string
		data    string
		offsets []uint32
		cfg     string // the format's own config keys
	}{
		{xsv.WriterOptions{Format: "csv"}, "shard.00000.csv", "s,x\na,1\nb,2\n", []uint32{4, 8, 12},
			`"format": "csv", "hashes": [], "newline": "\n"`},
		{xsv.WriterOptions{}, "shard.00000.csv", "s,x\na,1\nb,2\n", []uint32{4, 8, 12},
			`"format": "csv", "hashes": [], "newline": "\n"`},
		{xsv.WriterOptions{Format: "tsv", Newline: "\r\n"}, "shard.00000.tsv", "s\tx\r\na\t1\r\nb\t2\r\n", []uint32{5, 10, 15},
			`"format": "tsv", "hashes": [], "newline": "\r\n"`},
		{xsv.WriterOptions{Format: "xsv", Separator: "|\u00e9"}, "shard.00000.xsv", "s|\u00e9x\na|\u00e91\nb|\u00e92\n", []uint32{6, 12, 18},
			`"format": "xsv", "hashes": [], "newline": "\n", "separator": "|\u00e9"`},
	}
	for _, c := range cases {
		t.Run(c.name+c.opts.Newline, func(t *testing.T) {
			o := c.opts
			o.Columns = map[string]string{"x": "int", "s": "str"}
			dir := write(t, &o, samples)
			cfg := `{"column_encodings": ["str", "int"], "column_names": ["s", "x"], "compression": null, ` + c.cfg + `, "size_limit": null, "version": 2}`
			wantMeta := meta(c.offsets, cfg)
			if got := readFile(t, filepath.Join(dir, c.name)); got != c.data {
				t.Errorf("data file:\n got %q\nwant %q", got, c.data)
			}
			if got := readFile(t, filepath.Join(dir, c.name+".meta")); got != string(wantMeta) {
				t.Errorf("meta file:\n got %q\nwant %q", got, wantMeta)
			}
			entry := strings.TrimSuffix(cfg, `, "size_limit": null, "version": 2}`) +
				fmt.Sprintf(`, "raw_data": {"basename": %q, "bytes": %d, "hashes": {}}, `, c.name, len(c.data)) +
				fmt.Sprintf(`"raw_meta": {"basename": "%s.meta", "bytes": %d, "hashes": {}}, `, c.name, len(wantMeta)) +
				`"samples": 2, "size_limit": null, "version": 2, "zip_data": null, "zip_meta": null}`
			if strings.Contains(c.cfg, "separator") {
				// separator sorts after raw_*: move it.
				sep := `, "separator": "|\u00e9"`
				entry = strings.Replace(entry, sep, "", 1)
				entry = strings.Replace(entry, `, "size_limit": null, "version": 2, "zip_data"`, sep+`, "size_limit": null, "version": 2, "zip_data"`, 1)
			}
			want := `{"shards": [` + entry + `], "version": 2}`
			if got := readFile(t, filepath.Join(dir, "index.json")); got != want {
				t.Errorf("index.json:\n got %s\nwant %s", got, want)
			}
		})
	}
}

// TestRecordBytes checks lines against hand-written text for every
// accepted Go type and Python's float spellings.
func TestRecordBytes(t *testing.T) {
	b, _ := new(big.Int).SetString("-123456789012345678901234567890", 10)
	s, err := xsv.NewSchema("csv", map[string]string{"a": "int", "b": "int", "c": "int", "d": "float", "e": "float", "f": "float", "g": "float", "h": "float", "i": "str"}, "", "")
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.AppendRecord(nil, format.Sample{"a": int8(-5), "b": uint64(math.MaxUint64), "c": b, "d": 1e-05, "e": 1e16,
		"f": math.NaN(), "g": math.Inf(-1), "h": float32(0.1), "i": "h\u00e9 \"q\""})
	if err != nil {
		t.Fatal(err)
	}
	want := "-5,18446744073709551615,-123456789012345678901234567890,1e-05,1e+16,nan,-inf,0.10000000149011612,h\u00e9 \"q\"\n"
	if string(got) != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if got := string(s.AppendHeader(nil)); got != "a,b,c,d,e,f,g,h,i\n" {
		t.Errorf("header %q", got)
	}
}

func TestRecordErrors(t *testing.T) {
	s, err := xsv.NewSchema("xsv", map[string]string{"f": "float", "i": "int", "s": "str", "t": "str"}, "::", "")
	if err != nil {
		t.Fatal(err)
	}
	good := format.Sample{"f": 1.5, "i": 1, "s": "x", "t": ":y"} // "x:::y" splits as "x", ":y"
	for name, mod := range map[string]func(format.Sample){
		"missing":       func(x format.Sample) { delete(x, "s") },
		"int float":     func(x format.Sample) { x["f"] = 1 },
		"float int":     func(x format.Sample) { x["i"] = 1.0 },
		"bool int":      func(x format.Sample) { x["i"] = true },
		"bytes str":     func(x format.Sample) { x["s"] = []byte("x") },
		"bad utf8":      func(x format.Sample) { x["s"] = "\xff" },
		"separator":     func(x format.Sample) { x["s"] = "a::b" },
		"newline":       func(x format.Sample) { x["s"] = "a\nb" },
		"split across":  func(x format.Sample) { x["s"] = "x:" },
		"split across2": func(x format.Sample) { x["s"] = "x:"; x["t"] = "y" },
	} {
		x := format.Sample{}
		for k, v := range good {
			x[k] = v
		}
		mod(x)
		if _, err := s.AppendRecord(nil, x); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := s.AppendRecord(nil, good); err != nil {
		t.Fatal(err)
	}
	for name, args := range map[string][4]any{
		"no columns":      {"csv", map[string]string{}, "", ""},
		"bad encoding":    {"csv", map[string]string{"a": "bytes"}, "", ""},
		"bad format":      {"psv", map[string]string{"a": "int"}, "", ""},
		"csv separator":   {"csv", map[string]string{"a": "int"}, ";", ""},
		"xsv no sep":      {"xsv", map[string]string{"a": "int"}, "", ""},
		"name has sep":    {"csv", map[string]string{"a,b": "int"}, "", ""},
		"name has nl":     {"tsv", map[string]string{"a\nb": "int"}, "", ""},
		"name bad utf8":   {"csv", map[string]string{"\xff": "int"}, "", ""},
		"newline bad utf": {"csv", map[string]string{"a": "int"}, "", "\xff"},
	} {
		if _, err := xsv.NewSchema(args[0].(string), args[1].(map[string]string), args[2].(string), args[3].(string)); err == nil {
			t.Errorf("NewSchema %s: no error", name)
		}
	}
}

// TestSizeLimit checks MosaicML's flushing rule for split formats (only
// line bytes count, not the header; flush when limit < size + line) and
// the 0-sample shard quirk, whose data file holds just the header.
func TestSizeLimit(t *testing.T) {
	rec := func(i int) format.Sample { return format.Sample{"s": strings.Repeat("x", i)} }
	cases := []struct {
		name    string
		limit   int64
		noEmpty bool
		lens    []int
		want    []int
		bytes   []int64 // data file sizes: header "s\n" (2) + lines
	}{
		{"fits exactly", 12, false, []int{5, 5, 5}, []int{2, 1}, []int64{14, 8}},
		{"one over", 11, false, []int{5, 5, 5}, []int{1, 1, 1}, []int64{8, 8, 8}},
		{"oversized first", 4, false, []int{9, 1}, []int{0, 1, 1}, []int64{2, 12, 4}},
		{"oversized first fixed", 4, true, []int{9, 1}, []int{1, 1}, []int64{12, 4}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var samples []format.Sample
			for _, n := range c.lens {
				samples = append(samples, rec(n))
			}
			dir := write(t, &xsv.WriterOptions{Format: "tsv", Columns: map[string]string{"s": "str"}, SizeLimit: c.limit, NoEmptyShards: c.noEmpty}, samples)
			idx := readIndex(t, dir)
			var got []int
			var gotBytes []int64
			for _, s := range idx.Shards {
				got = append(got, s.Samples)
				gotBytes = append(gotBytes, s.RawData.Bytes)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("samples per shard (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(c.bytes, gotBytes); diff != "" {
				t.Errorf("data bytes per shard (-want +got):\n%s", diff)
			}
			if c.want[0] == 0 {
				cfg := fmt.Sprintf(`{"column_encodings": ["str"], "column_names": ["s"], "compression": null, "format": "tsv", "hashes": [], "newline": "\n", "size_limit": %d, "version": 2}`, c.limit)
				if got := readFile(t, filepath.Join(dir, "shard.00000.tsv.meta")); got != string(meta([]uint32{2}, cfg)) {
					t.Errorf("empty shard meta %q", got)
				}
				if got := readFile(t, filepath.Join(dir, "shard.00000.tsv")); got != "s\n" {
					t.Errorf("empty shard data %q", got)
				}
			}
		})
	}
}

func TestCompressedFiles(t *testing.T) {
	var done []string
	dir := t.TempDir()
	w, err := xsv.NewWriter(dir, &xsv.WriterOptions{Columns: map[string]string{"a": "int"}, Compression: "gz:5", Hashes: []string{"md5"},
		OnFileDone: func(base, _ string) error { done = append(done, base); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := w.Write(format.Sample{"a": i}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"shard.00000.csv.gz", "shard.00000.csv.meta.gz", "index.json"}, done); diff != "" {
		t.Errorf("OnFileDone (-want +got):\n%s", diff)
	}
	info := readIndex(t, dir).Shards[0]
	zb, _ := os.ReadFile(filepath.Join(dir, info.ZipData.Basename))
	raw, err := compress.Decompress("gz", zb, info.RawData.Bytes)
	if err != nil || string(raw) != "a\n0\n1\n2\n3\n4\n" {
		t.Errorf("decompressed data %q, %v", raw, err)
	}
	if info.RawData.Hashes["md5"] == "" || info.ZipMeta.Hashes["md5"] == "" {
		t.Errorf("hashes missing: %+v", info)
	}
	sh, err := xsv.OpenDir(dir, &info)
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	s, err := sh.Sample(4)
	if err != nil || s["a"] != int64(4) {
		t.Errorf("sample 4: %v, %v", s, err)
	}
}

func TestWriterErrors(t *testing.T) {
	for name, o := range map[string]*xsv.WriterOptions{
		"nil":        nil,
		"no columns": {},
		"bad codec":  {Columns: map[string]string{"a": "int"}, Compression: "zstd:0"},
		"bad hash":   {Columns: map[string]string{"a": "int"}, Hashes: []string{"sha2"}},
		"huge limit": {Columns: map[string]string{"a": "int"}, SizeLimit: 1 << 32},
		"xsv no sep": {Format: "xsv", Columns: map[string]string{"a": "int"}},
	} {
		if w, err := xsv.NewWriter(t.TempDir(), o); err == nil {
			w.Close()
			t.Errorf("%s: no error", name)
		}
	}
	boom := errors.New("boom")
	w, err := xsv.NewWriter(t.TempDir(), &xsv.WriterOptions{Columns: map[string]string{"a": "int"}, OnFileDone: func(string, string) error { return boom }})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(format.Sample{"a": "x"}); err == nil {
		t.Error("bad sample accepted")
	}
	w.Write(format.Sample{"a": 1})
	if err := w.Finish(); !errors.Is(err, boom) {
		t.Errorf("Finish: %v", err)
	}
}
