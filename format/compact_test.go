package format_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/sluicedata/sluice/format"
)

// chunkReader returns at most n bytes per Read.
type chunkReader struct {
	r io.Reader
	n int
}

func (c chunkReader) Read(p []byte) (int, error) {
	if len(p) > c.n {
		p = p[:c.n]
	}
	return c.r.Read(p)
}

// parseAll parses b every way there is and checks that all agree with the
// reference tree parser: the same acceptance, ErrCorrupt on rejection,
// the same entries on acceptance.
func parseAll(t *testing.T, b []byte) (*format.Index, error) {
	t.Helper()
	ref, refErr := format.ParseIndexTree(b)
	ways := map[string]func() (*format.Index, error){
		"ParseIndex": func() (*format.Index, error) { return format.ParseIndex(b) },
		"one byte": func() (*format.Index, error) {
			c, err := format.ReadCompactIndex(iotest.OneByteReader(bytes.NewReader(b)))
			if err != nil {
				return nil, err
			}
			return c.Index(), nil
		},
		"chunks of 7": func() (*format.Index, error) {
			c, err := format.ReadCompactIndex(chunkReader{bytes.NewReader(b), 7})
			if err != nil {
				return nil, err
			}
			return c.Index(), nil
		},
		"SharedIndex": func() (*format.Index, error) {
			c, err := format.ParseCompactIndex(b)
			if err != nil {
				return nil, err
			}
			return c.SharedIndex(), nil
		},
		"whole reader": func() (*format.Index, error) {
			c, err := format.ReadCompactIndex(bytes.NewReader(b))
			if err != nil {
				return nil, err
			}
			return c.Index(), nil
		},
	}
	for name, parse := range ways {
		got, err := parse()
		if (err == nil) != (refErr == nil) {
			t.Fatalf("%s: error %v, reference parser: %v\n%q", name, err, refErr, b)
		}
		if err != nil {
			if !errors.Is(err, format.ErrCorrupt) {
				t.Fatalf("%s: error %v does not match ErrCorrupt", name, err)
			}
			continue
		}
		if !reflect.DeepEqual(got, ref) {
			t.Fatalf("%s: parsed index differs from the reference parser's\n got %+v\nwant %+v", name, got, ref)
		}
	}
	return ref, refErr
}

func TestCompactIndexFixtures(t *testing.T) {
	for _, p := range fixtureIndexes(t) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := parseAll(t, b); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
	}
}

func TestCompactIndexLarge(t *testing.T) {
	b := bigIndex(3000)
	idx, err := parseAll(t, b)
	if err != nil {
		t.Fatal(err)
	}
	if got := format.AppendIndex(nil, idx); !bytes.Equal(got, b) {
		t.Fatal("re-encoded index differs")
	}
	c, err := format.ReadCompactIndex(chunkReader{bytes.NewReader(b), 1000})
	if err != nil {
		t.Fatal(err)
	}
	if c.Len() != 3000 || c.NumConfigs() != 1 || c.Samples() != idx.Samples() {
		t.Fatalf("len %d configs %d samples %d", c.Len(), c.NumConfigs(), c.Samples())
	}
	for i := range 3000 {
		if c.ShardSamples(i) != idx.Shards[i].Samples || c.Basename(i) != idx.Shards[i].RawData.Basename {
			t.Fatalf("shard %d: %d %s", i, c.ShardSamples(i), c.Basename(i))
		}
	}
}

// TestCompactIndexCases covers what the fixtures do not: escapes,
// duplicate keys, unknown keys, nulls, several configurations, split
// formats, and the rejections of TestParseIndexRejects.
func TestCompactIndexCases(t *testing.T) {
	good := `{"column_encodings": ["int"], "column_names": ["id"], "column_sizes": [8], "compression": null, "format": "mds", "hashes": [], "raw_data": {"basename": "shard.00000.mds", "bytes": 20, "hashes": {}}, "samples": 1, "size_limit": null, "version": 2, "zip_data": null}`
	jsonShard := `{"columns": {"a": "int", "b": "str"}, "compression": "zstd", "format": "json", "hashes": ["sha1"], "newline": "\n", "raw_data": {"basename": "d\u00e9/shard.00001.json", "bytes": 5, "hashes": {"sha1": "ab", "sha1": "cd", "x\"y": "e\u00e9"}}, "raw_meta": {"basename": "shard.00001.json.meta", "bytes": 9, "hashes": null}, "samples": 3, "size_limit": 100, "version": 2, "zip_data": {"basename": "shard.00001.json.zstd", "bytes": 4, "extra": [1]}, "zip_meta": {"basename": "m", "bytes": 1, "bytes": 2}, "future": {"z": 1, "a": [NaN, -Infinity, 1.5e3]}}`
	wrap := func(shards ...string) string { return `{"shards": [` + strings.Join(shards, ", ") + `], "version": 2}` }
	cases := []string{
		wrap(good), wrap(good, jsonShard, good),
		`{"version": 2, "shards": [` + good + `]}`,
		` {"x": {"shards": 1}, "version": 2, "shards": [], "version": 2 } `,
		`{"shards": [` + good + `], "shards": [], "version": 2}`,
		wrap(strings.Replace(good, `"samples": 1`, `"samples": 1, "samples": 7, "sa\u006dples": 8`, 1)),
		wrap(strings.Replace(good, `"int"]`, `"str"], "k\u00e9y": "v"`, 1)),
		wrap(strings.Replace(good, `"compression": null`, `"compression": "zstd"`, 1)),
		wrap(strings.Replace(jsonShard, `"zip_meta": {"basename": "m", "bytes": 1, "bytes": 2}`, `"zip_meta": null`, 1)),
		wrap(strings.Replace(good, `shard.00000.mds`, `a/.../b..c`, 1)),
		wrap(strings.Replace(good, `shard.00000.mds`, `a/./b`, 1)),
		wrap(strings.Replace(good, `shard.00000.mds`, `a//b`, 1)),
		wrap(strings.Replace(good, `shard.00000.mds`, `a/`, 1)),
		wrap(strings.Replace(good, `shard.00000.mds`, `..`, 1)),
		wrap(strings.Replace(good, `shard.00000.mds`, `c:x`, 1)),
		wrap(strings.Replace(good, `shard.00000.mds`, `x\u005c`, 1)),
		wrap(strings.Replace(good, `"version": 2`, `"version": 2.0`, 1)),
		wrap(strings.Replace(good, `"version": 2`, `"version": "2"`, 1)),
		wrap(strings.Replace(good, `"bytes": 20`, `"bytes": 1e3`, 1)),
		wrap(strings.Replace(good, `"hashes": {}`, `"hashes": {"a": 1}`, 1)),
		wrap(strings.Replace(good, `"hashes": {}`, `"hashes": []`, 1)),
		wrap(strings.Replace(good, `"raw_data": {`, `"raw_data": 5, "x": {`, 1)),
		wrap(`[]`), wrap(`null`), `{"shards": {}, "version": 2}`, `{"shards": [], "version": 2} x`,
		`{"shards": [], "version": NaN}`, `"x"`, ``, `{`, `{"shards": [1`, `{"shards": [` + good,
		`{"shards": [], "version": 2, "x": "\ud800\u0041"}`, `{"shards": [], "version": 2, "x": "\u12"}`,
		`{"shards": [], "version": 2, "x": -}`, `{"shards": [], "version": 2, "x": 01}`,
		`{"shards": [], "version": 2, "x": [1,]}`, `{"shards": [], "version": 2, "x": tru}`,
		`{"shards": [], "version": 2, "x": "a` + "\x01" + `"}`,
	}
	for _, c := range cases {
		parseAll(t, []byte(c))
	}
}

// FuzzCompactIndex checks the compact parser, whole and streamed in
// small pieces, against the reference tree parser on arbitrary text.
func FuzzCompactIndex(f *testing.F) {
	f.Add([]byte(`{"shards": [], "version": 2}`))
	f.Add(bigIndex(2))
	good := `{"column_encodings": ["int"], "column_names": ["id"], "column_sizes": [8], "compression": null, "format": "mds", "hashes": [], "raw_data": {"basename": "shard.00000.mds", "bytes": 20, "hashes": {"x": "y"}}, "samples": 1, "size_limit": null, "version": 2, "zip_data": null, "q": 1}`
	f.Add([]byte(`{"version": 2, "shards": [` + good + `]}`))
	f.Add([]byte(`{"shards": [{"columns": {"a": "int"}, "compression": "gz", "format": "json", "hashes": [], "newline": "\n", "raw_data": {"basename": "a", "bytes": 5}, "raw_meta": {"basename": "b", "bytes": 9}, "samples": 3, "size_limit": null, "version": 2, "zip_data": {"basename": "c", "bytes": 4}, "zip_meta": {"basename": "m", "bytes": 1}}], "version": 2}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		parseAll(t, b)
	})
}

// TestReadCompactIndexReadError returns the reader's error, not a
// corruption: the text was not bad, it did not arrive.
func TestReadCompactIndexReadError(t *testing.T) {
	b := bigIndex(50)
	boom := errors.New("connection reset")
	r := io.MultiReader(bytes.NewReader(b[:len(b)/2]), iotest.ErrReader(boom))
	_, err := format.ReadCompactIndex(r)
	if !errors.Is(err, boom) || errors.Is(err, format.ErrCorrupt) {
		t.Fatalf("error %v: want the read error, not ErrCorrupt", err)
	}
	// A window larger than the default: one shard entry with a 600 KB
	// unknown value, read in small pieces.
	big := strings.Replace(string(bigIndex(3)), `"version": 2, "zip_data"`, `"version": 2, "x": "`+strings.Repeat("y", 600<<10)+`", "zip_data"`, 1)
	c, err := format.ReadCompactIndex(chunkReader{strings.NewReader(big), 4096})
	if err != nil || c.Len() != 3 || c.NumConfigs() != 2 {
		t.Fatalf("large entry: %v", err)
	}
}

// TestSharedIndexAllocs checks that SharedIndex shares what the shards'
// configuration has in common: a few allocations for 2,000 shards (Index
// makes several per shard), and the shared slices have no spare capacity
// (an append to one shard's copies).
func TestSharedIndexAllocs(t *testing.T) {
	var b bytes.Buffer
	b.WriteString(`{"shards": [`)
	for i := range 2000 {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, `{"column_encodings": ["str", "int"], "column_names": ["text", "id"], "column_sizes": [null, 8], "compression": "zstd", "format": "mds", "hashes": [], "raw_data": {"basename": "shard.%05d.mds", "bytes": 100, "hashes": {}}, "samples": 10, "size_limit": 1000, "version": 2, "zip_data": {"basename": "shard.%05d.mds.zstd", "bytes": 50, "hashes": {}}}`, i, i)
	}
	b.WriteString(`], "version": 2}`)
	c, err := format.ParseCompactIndex(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(3, func() { c.SharedIndex() }); n > 10 {
		t.Fatalf("SharedIndex of 2000 shards: %.0f allocations", n)
	}
	idx := c.SharedIndex()
	if !reflect.DeepEqual(idx, c.Index()) {
		t.Fatal("SharedIndex differs from Index")
	}
	for _, s := range idx.Shards[:3] {
		// Spare capacity would let an append to one shard's slice write
		// into the array the others share.
		if cap(s.ColumnNames) != len(s.ColumnNames) || cap(s.ColumnEncodings) != len(s.ColumnEncodings) || cap(s.ColumnSizes) != len(s.ColumnSizes) {
			t.Fatalf("shared slices with spare capacity: %d/%d", len(s.ColumnNames), cap(s.ColumnNames))
		}
	}
	if idx.Shards[3].ZipData.Basename != "shard.00003.mds.zstd" || idx.Shards[4].RawData.Basename != "shard.00004.mds" {
		t.Fatalf("files: %+v %+v", idx.Shards[3].ZipData, idx.Shards[4].RawData)
	}
}
