package xsv_test

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
	"github.com/sluicedata/sluice/format/xsv"
)

var cmpOpts = cmp.Options{
	cmp.Comparer(func(a, b float64) bool { return a == b && math.Signbit(a) == math.Signbit(b) || a != a && b != b }),
	cmp.Comparer(func(a, b *big.Int) bool { return a.Cmp(b) == 0 }),
}

func randString(r *rand.Rand) string {
	alphabet := []rune("abc xyz\"'\\\x00é中\U0001F600")
	var b strings.Builder
	for range r.IntN(12) {
		b.WriteRune(alphabet[r.IntN(len(alphabet))])
	}
	return b.String()
}

func randFloat(r *rand.Rand) float64 {
	switch r.IntN(6) {
	case 0:
		return math.Inf(1 - 2*r.IntN(2))
	case 1:
		return math.Float64frombits(r.Uint64())
	case 2:
		return math.Copysign(0, -1)
	}
	return r.NormFloat64() * math.Pow(10, float64(r.IntN(40)-20))
}

func randInt(r *rand.Rand) any {
	if r.IntN(4) == 0 {
		b := new(big.Int).Lsh(big.NewInt(int64(r.IntN(1000)+1)), uint(64+r.IntN(100)))
		if r.IntN(2) == 0 {
			b.Neg(b)
		}
		return b
	}
	return int64(r.Uint64())
}

// TestRoundTrip writes random samples in every format with every codec
// and reads them back through OpenDir.
func TestRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	cols := map[string]string{"f": "float", "i": "int", "s": "str", "t\u00e9": "str"}
	for _, fmtName := range []string{"csv", "tsv", "xsv"} {
		for _, codec := range append([]string{""}, compress.Families()...) {
			t.Run(fmtName+"/codec="+codec, func(t *testing.T) {
				var samples []format.Sample
				for range 200 {
					samples = append(samples, format.Sample{"f": randFloat(r), "i": randInt(r), "s": randString(r), "t\u00e9": randString(r)})
				}
				o := &xsv.WriterOptions{Format: fmtName, Columns: cols, Compression: codec, SizeLimit: int64(100 + r.IntN(2000)), Newline: []string{"", "\r\n"}[r.IntN(2)]}
				if fmtName == "xsv" {
					o.Separator = "|"
				}
				dir := write(t, o, samples)
				idx := readIndex(t, dir)
				i := 0
				for k := range idx.Shards {
					sh, err := xsv.OpenDir(dir, &idx.Shards[k])
					if err != nil {
						t.Fatal(err)
					}
					for j := 0; j < sh.Len(); j++ {
						got, err := sh.Sample(j)
						if err != nil {
							t.Fatal(err)
						}
						if diff := cmp.Diff(samples[i], got, cmpOpts); diff != "" {
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
}

// TestParseNumbers checks the Python int() and float() grammars.
func TestParseNumbers(t *testing.T) {
	huge, _ := new(big.Int).SetString("-100000000000000000000", 10)
	ints := map[string]any{"1": int64(1), " +007 ": int64(7), "-0": int64(0), "1_000": int64(1000), "\t-42\n": int64(-42),
		"-100_000_000_000_000_000_000": huge, "9223372036854775807": int64(math.MaxInt64)}
	for in, want := range ints {
		got, err := xsv.ParseInt(in)
		if err != nil || cmp.Diff(want, got, cmpOpts) != "" {
			t.Errorf("ParseInt(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", " ", "+", "1_", "_1", "1__0", "0x10", "1.0", "1e3", "٣", "--1", strings.Repeat("1", 4301)} {
		if v, err := xsv.ParseInt(in); err == nil {
			t.Errorf("ParseInt(%.20q) = %v, want error", in, v)
		}
	}
	floats := map[string]float64{"1": 1, "1.": 1, ".5": 0.5, " -1.5e3 ": -1500, "1_0.2_5": 10.25, "1E+05": 1e5, "inf": math.Inf(1),
		"-Infinity": math.Inf(-1), "+iNf": math.Inf(1), "1e999": math.Inf(1), "-1e999": math.Inf(-1), "-0.0": math.Copysign(0, -1),
		"nan": math.NaN(), "-NaN": math.NaN(), "1e-400": 0}
	for in, want := range floats {
		got, err := xsv.ParseFloat(in)
		if err != nil || cmp.Diff(want, got, cmpOpts) != "" {
			t.Errorf("ParseFloat(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", ".", "e5", "1e", "1e_5", "0x1p3", "1_.5", "1._5", "infin", "nan1", "1,5", "1e5.0", "_1.0"} {
		if v, err := xsv.ParseFloat(in); err == nil {
			t.Errorf("ParseFloat(%q) = %v, want error", in, v)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	s, err := xsv.NewSchema("csv", map[string]string{"a": "int", "b": "float", "c": "str"}, "", "\r\n")
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Decode([]byte("1,2.5,x y\r\n"))
	if err != nil || cmp.Diff(format.Sample{"a": int64(1), "b": 2.5, "c": "x y"}, got) != "" {
		t.Errorf("Decode: %v, %v", got, err)
	}
	for _, bad := range []string{"1,2.5,x\n", "1,2.5\r\n", "1,2.5,x,y\r\n", "x,2.5,x\r\n", "1,x,x\r\n", "1,2.5,\xff\r\n", ""} {
		if _, err := s.Decode([]byte(bad)); !errors.Is(err, format.ErrCorrupt) {
			t.Errorf("Decode(%q): %v, want ErrCorrupt", bad, err)
		}
	}
}

func shardBytes(t testing.TB) ([]byte, []byte, *format.ShardInfo) {
	dir := t.TempDir()
	w, err := xsv.NewWriter(dir, &xsv.WriterOptions{Format: "xsv", Separator: ";", Columns: map[string]string{"s": "str", "x": "int", "f": "float"}})
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range []string{"a", "bé", ""} {
		if err := w.Write(format.Sample{"s": s, "x": i, "f": float64(i) / 2}); err != nil {
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
	want := []format.Sample{{"s": "a", "x": int64(0), "f": 0.0}, {"s": "bé", "x": int64(1), "f": 0.5}, {"s": "", "x": int64(2), "f": 1.0}}
	for name, open := range map[string]func() (*xsv.Shard, error){
		"bytes":           func() (*xsv.Shard, error) { return xsv.OpenBytes(data, meta, info) },
		"bytes, no index": func() (*xsv.Shard, error) { return xsv.OpenBytes(data, meta, nil) },
		"readerat":        func() (*xsv.Shard, error) { return xsv.OpenShard(bytes.NewReader(data), int64(len(data)), meta, info) },
	} {
		t.Run(name, func(t *testing.T) {
			sh, err := open()
			if err != nil {
				t.Fatal(err)
			}
			defer sh.Close()
			if sh.Len() != 3 || sh.Schema().Separator() != ";" || sh.Schema().Format() != "xsv" {
				t.Fatalf("Len %d schema %+v", sh.Len(), sh.Schema())
			}
			if off, _, _ := sh.Span(0); off != int64(len("f;s;x\n")) {
				t.Errorf("first record at %d", off)
			}
			for j := range want {
				got, err := sh.Sample(j)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(want[j], got); diff != "" {
					t.Errorf("sample %d (-want +got):\n%s", j, diff)
				}
			}
			if _, err := sh.Record(3); err == nil {
				t.Error("Record(3): no error")
			}
		})
	}
}

func TestCorruptShards(t *testing.T) {
	data, meta, info := shardBytes(t)
	le := binary.LittleEndian
	mod := func(f func(m []byte) []byte) []byte { return f(append([]byte(nil), meta...)) }
	cases := map[string]struct {
		data, meta []byte
		info       *format.ShardInfo
	}{
		"empty meta":       {data, nil, nil},
		"huge count":       {data, mod(func(m []byte) []byte { le.PutUint32(m, math.MaxUint32); return m }), nil},
		"offsets decrease": {data, mod(func(m []byte) []byte { le.PutUint32(m[12:], 1); return m }), nil},
		"last not size":    {append(data, 'x'), meta, nil},
		"no config":        {data, meta[:24], nil},
		"config no sep":    {data, mod(func(m []byte) []byte { return []byte(strings.Replace(string(m), `"separator": ";", `, "", 1)) }), nil},
		"config bad enc":   {data, mod(func(m []byte) []byte { return []byte(strings.Replace(string(m), `"int"`, `"i64"`, 1)) }), nil},
		"index samples":    {data, meta, &format.ShardInfo{Format: "xsv", Separator: ";", Samples: 4, RawData: format.FileInfo{Bytes: int64(len(data))}, RawMeta: &format.FileInfo{Bytes: int64(len(meta))}}},
		"index format":     {data, meta, &format.ShardInfo{Format: "json", Samples: 3, RawData: format.FileInfo{Bytes: int64(len(data))}, RawMeta: &format.FileInfo{Bytes: int64(len(meta))}}},
		"index columns":    {data, meta, &format.ShardInfo{Format: "csv", Samples: 3, ColumnNames: []string{"a"}, RawData: format.FileInfo{Bytes: int64(len(data))}, RawMeta: &format.FileInfo{Bytes: int64(len(meta))}}},
	}
	for name, c := range cases {
		sh, err := xsv.OpenBytes(c.data, c.meta, c.info)
		if err == nil {
			sh.Close()
			t.Errorf("%s: no error", name)
			continue
		}
		if !errors.Is(err, format.ErrCorrupt) {
			t.Errorf("%s: %v does not match ErrCorrupt", name, err)
		}
	}
	bad := bytes.Replace(data, []byte("0.5"), []byte("0,5"), 1)
	sh, err := xsv.OpenBytes(bad, meta, info)
	if err != nil {
		t.Fatal(err)
	}
	_, err = sh.Sample(1)
	var ce *format.CorruptError
	if !errors.As(err, &ce) || ce.Sample != 1 || ce.File != info.RawData.Basename || ce.Offset <= 0 {
		t.Errorf("damaged line: %v", err)
	}
}
