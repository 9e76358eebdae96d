package format_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicedata/sluice/format"
)

const fixtures = "../../shared/fixtures/mds"

func fixtureIndexes(t *testing.T) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(fixtures, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Name() == "index.json" {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("fixtures not available: %v", err) // CI always has ../shared beside the clone
		}
		t.Skipf("fixtures not available: %v", err)
	}
	return out
}

func TestIndexRoundTripFixtures(t *testing.T) {
	paths := fixtureIndexes(t)
	if len(paths) < 10 {
		t.Fatalf("found only %d fixture indexes", len(paths))
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		idx, err := format.ParseIndex(b)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		got := format.AppendIndex(nil, idx)
		if !bytes.Equal(got, b) {
			t.Errorf("%s: re-encoded index differs\n got %s\nwant %s", p, got, b)
		}
	}
}

func TestParseIndexRejects(t *testing.T) {
	good := `{"column_encodings": ["int"], "column_names": ["id"], "column_sizes": [8], "compression": null, "format": "mds", "hashes": [], "raw_data": {"basename": "shard.00000.mds", "bytes": 20, "hashes": {}}, "samples": 1, "size_limit": null, "version": 2, "zip_data": null}`
	if _, err := format.ParseIndex([]byte(`{"shards": [` + good + `], "version": 2}`)); err != nil {
		t.Fatalf("good index: %v", err)
	}
	cases := map[string]string{
		"version 3":        `{"shards": [], "version": 3}`,
		"no version":       `{"shards": []}`,
		"bad json":         `{"shards": [`,
		"not object":       `[1]`,
		"shard version":    `{"shards": [` + strings.Replace(good, `"version": 2`, `"version": 1`, 1) + `], "version": 2}`,
		"negative samples": `{"shards": [` + strings.Replace(good, `"samples": 1`, `"samples": -1`, 1) + `], "version": 2}`,
		"absurd samples":   `{"shards": [` + strings.Replace(good, `"samples": 1`, `"samples": 99999999999`, 1) + `], "version": 2}`,
		"dotdot":           `{"shards": [` + strings.Replace(good, `shard.00000.mds`, `../x.mds`, 1) + `], "version": 2}`,
		"absolute":         `{"shards": [` + strings.Replace(good, `shard.00000.mds`, `/etc/passwd`, 1) + `], "version": 2}`,
		"backslash":        `{"shards": [` + strings.Replace(good, `shard.00000.mds`, `a\\..\\b`, 1) + `], "version": 2}`,
		"nul":              `{"shards": [` + strings.Replace(good, `shard.00000.mds`, `a\u0000b`, 1) + `], "version": 2}`,
		"size mismatch":    `{"shards": [` + strings.Replace(good, `[8]`, `[8, 8]`, 1) + `], "version": 2}`,
		"float bytes":      `{"shards": [` + strings.Replace(good, `"bytes": 20`, `"bytes": 2.5`, 1) + `], "version": 2}`,
		"missing raw":      `{"shards": [` + strings.Replace(good, `"raw_data"`, `"raw_dat"`, 1) + `], "version": 2}`,
	}
	for name, in := range cases {
		_, err := format.ParseIndex([]byte(in))
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if !errors.Is(err, format.ErrCorrupt) {
			t.Errorf("%s: error %v does not match ErrCorrupt", name, err)
		}
	}
}

func TestAppendJSONString(t *testing.T) {
	got := string(format.AppendJSONString(nil, "a\"\\\b\f\n\r\t\x01\x7f/<>&é😀"))
	want := `"a\"\\\b\f\n\r\t\u0001\u007f/<>&\u00e9\ud83d\ude00"`
	if got != want {
		t.Errorf("got %s want %s", got, want)
	}
}

func TestPyFloat(t *testing.T) {
	for x, want := range map[float64]string{
		1: "1.0", 0.1: "0.1", 1e-5: "1e-05", 1e16: "1e+16", 123456789: "123456789.0",
		0.0001: "0.0001", 1.2345678901234568e+16: "1.2345678901234568e+16", 1e22: "1e+22",
		-2.5: "-2.5", 1.5e300: "1.5e+300", 1e-300: "1e-300",
	} {
		if got := format.FormatPyFloat(x); got != want {
			t.Errorf("%v: got %s want %s", x, got, want)
		}
	}
}

func TestFloat16(t *testing.T) {
	if got := format.Float16From(0.1); got != 0x2e66 {
		t.Errorf("0.1 → %#x, want 0x2e66", uint16(got))
	}
	if got := format.Float16From(42); got != 0x5140 {
		t.Errorf("42 → %#x, want 0x5140", uint16(got))
	}
	for i := 0; i < 1<<16; i++ {
		f := format.Float16(i)
		x := f.Float64()
		if x != x { // NaN
			continue
		}
		if back := format.Float16From(x); back != f {
			t.Fatalf("%#x → %v → %#x", i, x, uint16(back))
		}
	}
}

func TestAppendJSONStringUTF8(t *testing.T) {
	got := string(format.AppendJSONStringUTF8(nil, "a\"\\\n\x01\x7fé😀\xff"))
	want := "\"a\\\"\\\\\\n\\u0001\x7fé😀\uFFFD\""
	if got != want {
		t.Errorf("got %s want %s", got, want)
	}
}

// FuzzParseIndex parses arbitrary index text; whatever parses must
// re-encode to text that parses to the same entries.
func FuzzParseIndex(f *testing.F) {
	paths, _ := filepath.Glob(filepath.Join(fixtures, "*", "data", "index.json"))
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"shards": [], "version": 2}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		idx, err := format.ParseIndex(b)
		if err != nil {
			if !errors.Is(err, format.ErrCorrupt) {
				t.Fatalf("error %v does not match ErrCorrupt", err)
			}
			return
		}
		text := format.AppendIndex(nil, idx)
		idx2, err := format.ParseIndex(text)
		if err != nil {
			t.Fatalf("re-encoded index does not parse: %v\n%s", err, text)
		}
		if again := format.AppendIndex(nil, idx2); !bytes.Equal(again, text) {
			t.Fatalf("not stable:\n%s\n%s", text, again)
		}
	})
}

// FuzzParseJSON checks that the Python-compatible JSON parser never
// panics and that re-encoded values parse again.
func FuzzParseJSON(f *testing.F) {
	f.Add([]byte(`{"b": [1, 2.5, null, true], "a": "\u00e9", "n": NaN, "i": -Infinity}`))
	f.Add([]byte(`[[[[[]]]]]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := format.ParseJSON(b)
		if err != nil {
			return
		}
		text, err := format.AppendJSON(nil, v, true)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := format.ParseJSON(text); err != nil {
			t.Fatalf("re-encoded %s does not parse: %v", text, err)
		}
	})
}

// TestKeySets checks the exact key set of every format's entry (spec 2.6).
func TestKeySets(t *testing.T) {
	fi := format.FileInfo{Basename: "shard.00000.x", Bytes: 1}
	want := map[string]string{
		"mds":  "column_encodings column_names column_sizes compression format hashes raw_data samples size_limit version zip_data",
		"json": "columns compression format hashes newline raw_data raw_meta samples size_limit version zip_data zip_meta",
		"csv":  "column_encodings column_names compression format hashes newline raw_data raw_meta samples size_limit version zip_data zip_meta",
		"tsv":  "column_encodings column_names compression format hashes newline raw_data raw_meta samples size_limit version zip_data zip_meta",
		"xsv":  "column_encodings column_names compression format hashes newline raw_data raw_meta samples separator size_limit version zip_data zip_meta",
	}
	for f, keys := range want {
		s := format.ShardInfo{Format: f, Version: 2, RawData: fi, Newline: "\n", Separator: "|",
			ColumnNames: []string{"a"}, ColumnEncodings: []string{"int"}, ColumnSizes: []int{8}, Columns: map[string]string{"a": "int"}}
		if f != "mds" {
			s.RawMeta = &fi
			s.ColumnSizes = nil
		}
		text := format.AppendIndex(nil, &format.Index{Shards: []format.ShardInfo{s}})
		v, err := format.ParseJSON(text)
		if err != nil {
			t.Fatal(err)
		}
		entry := v.(*format.JSONObject).Values["shards"].([]any)[0].(*format.JSONObject)
		if got := strings.Join(entry.Keys, " "); got != keys {
			t.Errorf("%s keys:\n got %s\nwant %s", f, got, keys)
		}
		idx, err := format.ParseIndex(text)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if again := format.AppendIndex(nil, idx); !bytes.Equal(again, text) {
			t.Errorf("%s: round trip differs", f)
		}
		cfg := string(format.AppendConfig(nil, &s))
		for _, k := range []string{"raw_data", "samples", "zip_data", "raw_meta", "zip_meta"} {
			if strings.Contains(cfg, `"`+k+`"`) {
				t.Errorf("%s config has %s: %s", f, k, cfg)
			}
		}
	}
}
