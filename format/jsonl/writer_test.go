package jsonl_test

import (
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
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
	"github.com/sluicedata/sluice/format/jsonl"
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

func write(t *testing.T, opts *jsonl.WriterOptions, samples []format.Sample) string {
	t.Helper()
	dir := t.TempDir()
	w, err := jsonl.NewWriter(dir, opts)
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

// TestWriterSpecExample writes the example of spec section 7.1 and
// compares every file with bytes derived by hand from the spec's rules.
func TestWriterSpecExample(t *testing.T) {
	dir := write(t, &jsonl.WriterOptions{Columns: map[string]string{"s": "str", "x": "int"}},
		[]format.Sample{{"s": "a", "x": 1, "ignored": true}, {"s": "b\u00e9", "x": int64(2)}})

	wantData := "{\"s\": \"a\", \"x\": 1}\n{\"s\": \"b\\u00e9\", \"x\": 2}\n"
	const cfg = `{"columns": {"s": "str", "x": "int"}, "compression": null, "format": "json", "hashes": [], "newline": "\n", "size_limit": null, "version": 2}`
	wantMeta := meta([]uint32{0, 19, 44}, cfg)
	if got := readFile(t, filepath.Join(dir, "shard.00000.json")); got != wantData {
		t.Errorf("data file:\n got %q\nwant %q", got, wantData)
	}
	if got := readFile(t, filepath.Join(dir, "shard.00000.json.meta")); got != string(wantMeta) {
		t.Errorf("meta file:\n got %q\nwant %q", got, wantMeta)
	}
	wantIndex := `{"shards": [{"columns": {"s": "str", "x": "int"}, "compression": null, "format": "json", "hashes": [], "newline": "\n", ` +
		`"raw_data": {"basename": "shard.00000.json", "bytes": 44, "hashes": {}}, ` +
		fmt.Sprintf(`"raw_meta": {"basename": "shard.00000.json.meta", "bytes": %d, "hashes": {}}, `, len(wantMeta)) +
		`"samples": 2, "size_limit": null, "version": 2, "zip_data": null, "zip_meta": null}], "version": 2}`
	if got := readFile(t, filepath.Join(dir, "index.json")); got != wantIndex {
		t.Errorf("index.json:\n got %s\nwant %s", got, wantIndex)
	}
}

// TestRecordBytes checks single records against hand-written text: value
// spellings of every accepted Go type, escaping and float repr.
func TestRecordBytes(t *testing.T) {
	big1, _ := new(big.Int).SetString("-123456789012345678901234567890", 10)
	cases := []struct {
		name    string
		cols    map[string]string
		newline string
		sample  format.Sample
		want    string
	}{
		{"ints", map[string]string{"a": "int", "b": "int", "c": "int", "d": "int"}, "",
			format.Sample{"a": int8(-5), "b": uint64(math.MaxUint64), "c": big1, "d": true},
			`{"a": -5, "b": 18446744073709551615, "c": -123456789012345678901234567890, "d": true}` + "\n"},
		{"floats", map[string]string{"a": "float", "b": "float", "c": "float", "d": "float", "e": "float", "f": "float"}, "\r\n",
			format.Sample{"a": 1.0, "b": 0.1, "c": 1e-05, "d": 1e16, "e": math.NaN(), "f": math.Inf(-1)},
			`{"a": 1.0, "b": 0.1, "c": 1e-05, "d": 1e+16, "e": NaN, "f": -Infinity}` + "\r\n"},
		{"float32", map[string]string{"f": "float"}, "",
			format.Sample{"f": float32(0.1)}, `{"f": 0.10000000149011612}` + "\n"},
		{"strings", map[string]string{"k\u00e9y": "str", "A": "str"}, "|",
			format.Sample{"k\u00e9y": "q\"b\\\n\t\x7f/<&>\U0001F600", "A": ""},
			`{"A": "", "k\u00e9y": "q\"b\\\n\t\u007f/<&>\ud83d\ude00"}|`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := jsonl.NewSchema(c.cols, c.newline)
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.AppendRecord([]byte("prefix"), c.sample)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != "prefix"+c.want {
				t.Errorf("got  %q\nwant %q", got, "prefix"+c.want)
			}
		})
	}
}

func TestRecordErrors(t *testing.T) {
	s, err := jsonl.NewSchema(map[string]string{"f": "float", "i": "int", "s": "str"}, "")
	if err != nil {
		t.Fatal(err)
	}
	good := format.Sample{"f": 1.5, "i": 1, "s": "x"}
	for name, mod := range map[string]func(format.Sample){
		"missing":     func(x format.Sample) { delete(x, "s") },
		"int float":   func(x format.Sample) { x["f"] = 1 },
		"float int":   func(x format.Sample) { x["i"] = 1.0 },
		"bytes str":   func(x format.Sample) { x["s"] = []byte("x") },
		"bad utf8":    func(x format.Sample) { x["s"] = "\xff" },
		"nil big":     func(x format.Sample) { x["i"] = (*big.Int)(nil) },
		"string int":  func(x format.Sample) { x["i"] = "1" },
		"str is nil":  func(x format.Sample) { x["s"] = nil },
		"float16 val": func(x format.Sample) { x["f"] = format.Float16(1) },
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
	for _, cols := range []map[string]string{{"a": "bytes"}, {"a": "int64"}, {"\xff": "int"}} {
		if _, err := jsonl.NewSchema(cols, ""); err == nil {
			t.Errorf("NewSchema(%v): no error", cols)
		}
	}
}

// TestSizeLimit checks MosaicML's flushing rule (only record bytes count;
// flush when limit < size + record) and the 0-sample shard quirk.
func TestSizeLimit(t *testing.T) {
	rec := func(i int) format.Sample { return format.Sample{"s": strings.Repeat("x", i)} }
	// Record of n characters is {"s": "…"}\n: 10 + n bytes.
	cases := []struct {
		name    string
		limit   int64
		noEmpty bool
		lens    []int
		want    []int // samples per shard
		bytes   []int64
	}{
		{"fits exactly", 30, false, []int{5, 5, 5}, []int{2, 1}, []int64{30, 15}},
		{"one over", 29, false, []int{5, 5, 5}, []int{1, 1, 1}, []int64{15, 15, 15}},
		{"oversized first", 12, false, []int{20, 1}, []int{0, 1, 1}, []int64{0, 30, 11}},
		{"oversized first fixed", 12, true, []int{20, 1}, []int{1, 1}, []int64{30, 11}},
		{"oversized middle", 12, false, []int{1, 20, 1}, []int{1, 1, 1}, []int64{11, 30, 11}},
		{"no limit", 0, false, []int{100, 100}, []int{2}, []int64{220}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var samples []format.Sample
			for _, n := range c.lens {
				samples = append(samples, rec(n))
			}
			dir := write(t, &jsonl.WriterOptions{Columns: map[string]string{"s": "str"}, SizeLimit: c.limit, NoEmptyShards: c.noEmpty}, samples)
			idx := readIndex(t, dir)
			var got []int
			var gotBytes []int64
			for k, s := range idx.Shards {
				got = append(got, s.Samples)
				gotBytes = append(gotBytes, s.RawData.Bytes)
				if s.SizeLimit != c.limit && !(c.limit == 0 && s.SizeLimit == 0) {
					t.Errorf("shard %d: size_limit %d", k, s.SizeLimit)
				}
				if want := fmt.Sprintf("shard.%05d.json", k); s.RawData.Basename != want {
					t.Errorf("shard %d named %s", k, s.RawData.Basename)
				}
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("samples per shard (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(c.bytes, gotBytes); diff != "" {
				t.Errorf("data bytes per shard (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEmptyShardFiles(t *testing.T) {
	dir := write(t, &jsonl.WriterOptions{Columns: map[string]string{"s": "str"}, SizeLimit: 5},
		[]format.Sample{{"s": "0123456789"}})
	if got := readFile(t, filepath.Join(dir, "shard.00000.json")); got != "" {
		t.Errorf("empty shard data %q", got)
	}
	const cfg = `{"columns": {"s": "str"}, "compression": null, "format": "json", "hashes": [], "newline": "\n", "size_limit": 5, "version": 2}`
	if got := readFile(t, filepath.Join(dir, "shard.00000.json.meta")); got != string(meta([]uint32{0}, cfg)) {
		t.Errorf("empty shard meta %q", got)
	}
	if got := readFile(t, filepath.Join(dir, "shard.00001.json.meta")); got != string(meta([]uint32{0, 20}, cfg)) {
		t.Errorf("second shard meta %q", got)
	}
}

func TestNoSamples(t *testing.T) {
	dir := write(t, &jsonl.WriterOptions{Columns: map[string]string{"s": "str"}}, nil)
	if got := readFile(t, filepath.Join(dir, "index.json")); got != `{"shards": [], "version": 2}` {
		t.Errorf("index %s", got)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("%d files, want only index.json", len(ents))
	}
}

// TestCompressionAndHashes checks file names, the hashes of raw and
// compressed files (computed independently here), that only compressed
// files are stored, and OnFileDone's order.
func TestCompressionAndHashes(t *testing.T) {
	var done []string
	dir := t.TempDir()
	w, err := jsonl.NewWriter(dir, &jsonl.WriterOptions{
		Columns:     map[string]string{"s": "str"},
		Compression: "zstd:7", Hashes: []string{"sha1", "xxh64"}, SizeLimit: 25,
		OnFileDone: func(base, path string) error {
			if _, err := os.Stat(path); err != nil {
				return err
			}
			done = append(done, base)
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"hello", "world", "again"} {
		if err := w.Write(format.Sample{"s": s}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	want := []string{"shard.00000.json.zstd", "shard.00000.json.meta.zstd", "shard.00001.json.zstd", "shard.00001.json.meta.zstd",
		"shard.00002.json.zstd", "shard.00002.json.meta.zstd", "index.json"}
	if diff := cmp.Diff(want, done); diff != "" {
		t.Errorf("OnFileDone order (-want +got):\n%s", diff)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != len(want) {
		t.Errorf("%d files in the directory, want %d", len(ents), len(want))
	}
	idx := readIndex(t, dir)
	for k, s := range idx.Shards {
		if s.Compression != "zstd:7" || s.ZipData == nil || s.ZipMeta == nil {
			t.Fatalf("shard %d: %+v", k, s)
		}
		for _, f := range []struct{ raw, zip *format.FileInfo }{{&s.RawData, s.ZipData}, {s.RawMeta, s.ZipMeta}} {
			zb, err := os.ReadFile(filepath.Join(dir, f.zip.Basename))
			if err != nil {
				t.Fatal(err)
			}
			raw, err := compress.Decompress("zstd", zb, f.raw.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			if int64(len(raw)) != f.raw.Bytes || int64(len(zb)) != f.zip.Bytes {
				t.Errorf("%s: sizes %d/%d, index %d/%d", f.raw.Basename, len(raw), len(zb), f.raw.Bytes, f.zip.Bytes)
			}
			for _, c := range []struct {
				b    []byte
				info *format.FileInfo
			}{{raw, f.raw}, {zb, f.zip}} {
				sum := sha1.Sum(c.b)
				if got := c.info.Hashes["sha1"]; got != hex.EncodeToString(sum[:]) {
					t.Errorf("%s sha1 %s, want %x", c.info.Basename, got, sum)
				}
				if len(c.info.Hashes["xxh64"]) != 16 {
					t.Errorf("%s xxh64 %q", c.info.Basename, c.info.Hashes["xxh64"])
				}
			}
		}
		sh, err := jsonl.OpenDir(dir, &idx.Shards[k])
		if err != nil {
			t.Fatal(err)
		}
		if sh.Len() != 1 {
			t.Errorf("shard %d has %d samples", k, sh.Len())
		}
		sh.Close()
	}
}

func TestWriterErrors(t *testing.T) {
	dir := t.TempDir()
	for name, o := range map[string]*jsonl.WriterOptions{
		"nil":         nil,
		"no columns":  {},
		"bad codec":   {Columns: map[string]string{"a": "int"}, Compression: "lz4"},
		"bad level":   {Columns: map[string]string{"a": "int"}, Compression: "zstd:23"},
		"bad hash":    {Columns: map[string]string{"a": "int"}, Hashes: []string{"crc"}},
		"hash order":  {Columns: map[string]string{"a": "int"}, Hashes: []string{"xxh64", "sha1"}},
		"huge limit":  {Columns: map[string]string{"a": "int"}, SizeLimit: 1 << 32},
		"bad columns": {Columns: map[string]string{"a": "ndarray"}},
	} {
		if w, err := jsonl.NewWriter(filepath.Join(dir, strings.ReplaceAll(name, " ", "_")), o); err == nil {
			w.Close()
			t.Errorf("%s: no error", name)
		}
	}
	// A non-empty directory needs ExistOK.
	os.WriteFile(filepath.Join(dir, "x"), nil, 0o644)
	if _, err := jsonl.NewWriter(dir, &jsonl.WriterOptions{Columns: map[string]string{"a": "int"}}); err == nil {
		t.Error("non-empty directory: no error")
	}
	w, err := jsonl.NewWriter(dir, &jsonl.WriterOptions{Columns: map[string]string{"a": "int"}, ExistOK: true})
	if err != nil {
		t.Fatal(err)
	}
	// A refused sample is not sticky.
	if err := w.Write(format.Sample{"a": "x"}); err == nil {
		t.Error("bad sample: no error")
	}
	if err := w.Write(format.Sample{"a": 1}); err != nil {
		t.Fatal(err)
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(format.Sample{"a": 1}); err == nil {
		t.Error("write after Finish: no error")
	}
}

func TestOnFileDoneErrorIsSticky(t *testing.T) {
	boom := errors.New("boom")
	w, err := jsonl.NewWriter(t.TempDir(), &jsonl.WriterOptions{Columns: map[string]string{"a": "int"}, SizeLimit: 1,
		OnFileDone: func(string, string) error { return boom }})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		w.Write(format.Sample{"a": i})
	}
	if err := w.Finish(); !errors.Is(err, boom) {
		t.Fatalf("Finish: %v, want boom", err)
	}
	if err := w.Write(format.Sample{"a": 1}); !errors.Is(err, boom) {
		t.Fatalf("Write after failure: %v", err)
	}
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
