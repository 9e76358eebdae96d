package jsonl_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/compress"
	"github.com/sluicedata/sluice/format/jsonl"
)

// randString returns a string mixing ASCII, escapes and non-BMP runes.
func randString(r *rand.Rand) string {
	alphabet := []rune("abc xyz\"\\\n\t\x00\x7f/<>&é中\U0001F600")
	n := r.IntN(12)
	var b strings.Builder
	for range n {
		b.WriteRune(alphabet[r.IntN(len(alphabet))])
	}
	return b.String()
}

func randFloat(r *rand.Rand) float64 {
	switch r.IntN(8) {
	case 0:
		return math.Inf(1 - 2*r.IntN(2))
	case 1:
		return math.Float64frombits(r.Uint64())
	case 2:
		return float64(r.IntN(1000))
	case 3:
		return math.Copysign(0, -1)
	}
	return r.NormFloat64() * math.Pow(10, float64(r.IntN(40)-20))
}

func randInt(r *rand.Rand) any {
	switch r.IntN(4) {
	case 0:
		b := new(big.Int).Lsh(big.NewInt(int64(r.IntN(1000)+1)), uint(64+r.IntN(100)))
		if r.IntN(2) == 0 {
			b.Neg(b)
		}
		return b
	case 1:
		return int64(r.Uint64())
	}
	return int64(r.IntN(2000) - 1000)
}

// TestRoundTrip writes random samples with every codec and reads them back
// through OpenDir, comparing each decoded sample.
func TestRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	cols := map[string]string{"f": "float", "i": "int", "s": "str", "t\u00e9": "str"}
	for _, codec := range append([]string{""}, compress.Families()...) {
		t.Run("codec="+codec, func(t *testing.T) {
			var samples []format.Sample
			for range 300 {
				samples = append(samples, format.Sample{"f": randFloat(r), "i": randInt(r), "s": randString(r), "t\u00e9": randString(r)})
			}
			dir := write(t, &jsonl.WriterOptions{Columns: cols, Compression: codec, SizeLimit: int64(200 + r.IntN(2000)), Newline: []string{"", "\r\n"}[r.IntN(2)]}, samples)
			idx := readIndex(t, dir)
			i := 0
			for k := range idx.Shards {
				sh, err := jsonl.OpenDir(dir, &idx.Shards[k])
				if err != nil {
					t.Fatal(err)
				}
				for j := 0; j < sh.Len(); j++ {
					got, err := sh.Sample(j)
					if err != nil {
						t.Fatal(err)
					}
					want := samples[i]
					if diff := cmp.Diff(want, got, cmpOpts); diff != "" {
						t.Fatalf("shard %d sample %d (-want +got):\n%s", k, j, diff)
					}
					i++
				}
				sh.Close()
			}
			if i != len(samples) {
				t.Fatalf("read %d samples, wrote %d", i, len(samples))
			}
		})
	}
}

var cmpOpts = cmp.Options{
	cmp.Comparer(func(a, b float64) bool { return a == b && math.Signbit(a) == math.Signbit(b) || a != a && b != b }),
	cmp.Comparer(func(a, b *big.Int) bool { return a.Cmp(b) == 0 }),
}

func TestDecodeTypes(t *testing.T) {
	s, err := jsonl.NewSchema(map[string]string{"a": "int"}, "")
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Decode([]byte(`{"a": 9223372036854775808, "b": -1, "c": 1.5, "d": NaN, "e": -Infinity, "f": 1e999, "g": [1, {"x": null}], "h": true, "i": null, "j": "s"}` + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := format.Sample{
		"a": new(big.Int).Lsh(big.NewInt(1), 63), "b": int64(-1), "c": 1.5, "d": math.NaN(), "e": math.Inf(-1), "f": math.Inf(1),
		"g": []any{format.JSONNumber("1"), &format.JSONObject{Keys: []string{"x"}, Values: map[string]any{"x": nil}}},
		"h": true, "i": nil, "j": "s",
	}
	if diff := cmp.Diff(want, got, cmpOpts); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, bad := range []string{"[1]\n", "{\"a\": 1\n", "\xff\n", "{\"a\": 1" + strings.Repeat("0", 5000) + "}\n", ""} {
		if _, err := s.Decode([]byte(bad)); !errors.Is(err, format.ErrCorrupt) {
			t.Errorf("Decode(%.20q): %v, want ErrCorrupt", bad, err)
		}
	}
}

// shardBytes returns a small valid shard: data, meta and index entry.
func shardBytes(t testing.TB) ([]byte, []byte, *format.ShardInfo) {
	dir := t.TempDir()
	w, err := jsonl.NewWriter(dir, &jsonl.WriterOptions{Columns: map[string]string{"s": "str", "x": "int"}})
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range []string{"a", "bé", "c"} {
		if err := w.Write(format.Sample{"s": s, "x": i}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	info := w.Shards()[0]
	data, _ := os.ReadFile(filepath.Join(dir, info.RawData.Basename))
	meta, _ := os.ReadFile(filepath.Join(dir, info.RawMeta.Basename))
	return data, meta, &info
}

func TestOpenShardVariants(t *testing.T) {
	data, meta, info := shardBytes(t)
	want := []format.Sample{{"s": "a", "x": int64(0)}, {"s": "bé", "x": int64(1)}, {"s": "c", "x": int64(2)}}
	open := map[string]func() (*jsonl.Shard, error){
		"bytes":           func() (*jsonl.Shard, error) { return jsonl.OpenBytes(data, meta, info) },
		"bytes, no index": func() (*jsonl.Shard, error) { return jsonl.OpenBytes(data, meta, nil) },
		"readerat": func() (*jsonl.Shard, error) {
			return jsonl.OpenShard(bytes.NewReader(data), int64(len(data)), meta, info)
		},
	}
	for name, f := range open {
		t.Run(name, func(t *testing.T) {
			sh, err := f()
			if err != nil {
				t.Fatal(err)
			}
			defer sh.Close()
			var _ format.Shard = sh
			if sh.Len() != 3 || sh.Size() != int64(len(data)) {
				t.Fatalf("Len %d Size %d", sh.Len(), sh.Size())
			}
			if sh.Info().Columns["x"] != "int" || sh.Schema().Newline() != "\n" {
				t.Errorf("info %+v", sh.Info())
			}
			for j := range want {
				got, err := sh.Sample(j)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(want[j], got); diff != "" {
					t.Errorf("sample %d (-want +got):\n%s", j, diff)
				}
				off, n, _ := sh.Span(j)
				rec, _ := sh.Record(j)
				if !bytes.Equal(rec, data[off:off+n]) {
					t.Errorf("Record(%d) = %q, span gives %q", j, rec, data[off:off+n])
				}
			}
			if _, _, err := sh.Span(3); err == nil {
				t.Error("Span(3): no error")
			}
			if _, err := sh.Sample(-1); err == nil {
				t.Error("Sample(-1): no error")
			}
		})
	}
}

// TestCorruptShards checks that every kind of damage gives ErrCorrupt
// with the file named, never a panic.
func TestCorruptShards(t *testing.T) {
	data, meta, info := shardBytes(t)
	le := binary.LittleEndian
	mod := func(f func(m []byte) []byte) []byte { return f(append([]byte(nil), meta...)) }
	cases := map[string]struct {
		data, meta []byte
		info       *format.ShardInfo
	}{
		"short meta":         {data, meta[:7], nil},
		"huge count":         {data, mod(func(m []byte) []byte { le.PutUint32(m, 1<<31); return m }), nil},
		"count past meta":    {data, mod(func(m []byte) []byte { le.PutUint32(m, 100); return m }), nil},
		"offsets decrease":   {data, mod(func(m []byte) []byte { le.PutUint32(m[8:], 50); return m }), nil},
		"last not size":      {data[:len(data)-1], meta, nil},
		"first past end":     {data, mod(func(m []byte) []byte { le.PutUint32(m[4:], 1000); return m }), nil},
		"bad config":         {data, mod(func(m []byte) []byte { return append(m[:20], "{"...) }), nil},
		"config not json fm": {data, mod(func(m []byte) []byte { return []byte(strings.Replace(string(m), `"json"`, `"csv"`, 1)) }), nil},
		"index size":         {data, meta, &format.ShardInfo{Format: "json", Samples: 3, RawData: format.FileInfo{Bytes: 1}, RawMeta: &format.FileInfo{Bytes: int64(len(meta))}}},
		"index meta size":    {data, meta, &format.ShardInfo{Format: "json", Samples: 3, RawData: format.FileInfo{Bytes: int64(len(data))}, RawMeta: &format.FileInfo{Bytes: 1}}},
		"index samples":      {data, meta, &format.ShardInfo{Format: "json", Samples: 2, RawData: format.FileInfo{Bytes: int64(len(data))}, RawMeta: &format.FileInfo{Bytes: int64(len(meta))}}},
		"index format":       {data, meta, &format.ShardInfo{Format: "mds", Samples: 3, RawData: format.FileInfo{Bytes: int64(len(data))}}},
		"index no meta":      {data, meta, &format.ShardInfo{Format: "json", Samples: 3, RawData: format.FileInfo{Bytes: int64(len(data))}}},
	}
	for name, c := range cases {
		sh, err := jsonl.OpenBytes(c.data, c.meta, c.info)
		if err == nil {
			sh.Close()
			t.Errorf("%s: no error", name)
			continue
		}
		if !errors.Is(err, format.ErrCorrupt) {
			t.Errorf("%s: %v does not match ErrCorrupt", name, err)
		}
	}
	// A damaged record is reported at its sample and offset.
	bad := append([]byte(nil), data...)
	bad[1] = 'X'
	sh, err := jsonl.OpenBytes(bad, meta, info)
	if err != nil {
		t.Fatal(err)
	}
	_, err = sh.Sample(0)
	var ce *format.CorruptError
	if !errors.As(err, &ce) || ce.Sample != 0 || ce.Offset != 0 || ce.File != info.RawData.Basename {
		t.Errorf("damaged record: %v", err)
	}
}
