package mds

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/compress"
)

type fixtureMeta struct {
	WriterArgs struct {
		Columns     map[string]string `json:"columns"`
		Compression *string           `json:"compression"`
		Hashes      []string          `json:"hashes"`
		SizeLimit   *int64            `json:"size_limit"`
	} `json:"writer_args"`
}

// sampleFromExpected rebuilds the sample MosaicML was given from an
// expected.jsonl line. Encodings whose bytes come from codec or pickle
// libraries (json key order, pkl, images) use the raw column bytes, which
// the writer passes through as MosaicML does.
func sampleFromExpected(t *testing.T, line []byte, encs map[string]string, raw map[string][]byte) format.Sample {
	t.Helper()
	var obj struct {
		Cols map[string]struct {
			V json.RawMessage `json:"v"`
		} `json:"cols"`
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if err := dec.Decode(&obj); err != nil {
		t.Fatal(err)
	}
	s := format.Sample{}
	for name, c := range obj.Cols {
		enc := encs[name]
		v := c.V
		var num json.Number
		var fl struct{ Bits string }
		var b64 struct{ B64 string }
		unmarshal := func(x any) {
			d := json.NewDecoder(bytes.NewReader(v))
			d.UseNumber()
			if err := d.Decode(x); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		bits := func() uint64 {
			unmarshal(&fl)
			n, err := strconv.ParseUint(fl.Bits, 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		bigInt := func() *big.Int {
			unmarshal(&num)
			n, ok := new(big.Int).SetString(num.String(), 10)
			if !ok {
				t.Fatalf("%s: bad int %s", name, num)
			}
			return n
		}
		e, err := ParseEncoding(enc)
		if err != nil {
			t.Fatal(err)
		}
		switch e.kind {
		case kStr, kStrDecimal:
			var str string
			unmarshal(&str)
			if e.kind == kStr {
				s[name] = str
			} else {
				s[name] = format.Decimal(str)
			}
		case kBytes:
			unmarshal(&b64)
			b, _ := base64.StdEncoding.DecodeString(b64.B64)
			s[name] = b
		case kInt, kI64:
			s[name] = bigInt().Int64()
		case kU8:
			s[name] = uint8(bigInt().Uint64())
		case kU16:
			s[name] = uint16(bigInt().Uint64())
		case kU32:
			s[name] = uint32(bigInt().Uint64())
		case kU64:
			s[name] = bigInt().Uint64()
		case kI8:
			s[name] = int8(bigInt().Int64())
		case kI16:
			s[name] = int16(bigInt().Int64())
		case kI32:
			s[name] = int32(bigInt().Int64())
		case kStrInt:
			s[name] = bigInt()
		case kF16:
			s[name] = format.Float16(bits())
		case kF32:
			s[name] = math.Float32frombits(uint32(bits()))
		case kF64, kStrFloat:
			s[name] = math.Float64frombits(bits())
		case kNDArray:
			var a struct {
				DataB64 string `json:"data_b64"`
				DType   string `json:"dtype"`
				Shape   []int  `json:"shape"`
			}
			unmarshal(&a)
			data, _ := base64.StdEncoding.DecodeString(a.DataB64)
			s[name] = &format.NDArray{DType: a.DType, Shape: a.Shape, Data: data}
		default:
			s[name] = raw[name]
		}
	}
	return s
}

func TestFixturesWriteIdentical(t *testing.T) {
	for _, name := range fixtureNames(t) {
		t.Run(name, func(t *testing.T) {
			mb, err := os.ReadFile(filepath.Join(fixturesDir, name, "meta.json"))
			if err != nil {
				t.Fatal(err)
			}
			var meta fixtureMeta
			if err := json.Unmarshal(mb, &meta); err != nil {
				t.Fatal(err)
			}
			want := readLines(t, filepath.Join(fixturesDir, name, "expected.jsonl"))
			data := filepath.Join(fixturesDir, name, "data")
			parts := []string{""}
			if ents, _ := filepath.Glob(filepath.Join(data, "part*")); len(ents) > 0 {
				parts = nil
				for _, e := range ents {
					parts = append(parts, filepath.Base(e))
				}
			}
			next := 0
			for _, part := range parts {
				src := filepath.Join(data, part)
				r, err := Open(src, &Options{AllowUnsafeTypes: true})
				if err != nil {
					t.Fatal(err)
				}
				out := t.TempDir()
				opts := &WriterOptions{Columns: meta.WriterArgs.Columns, Hashes: meta.WriterArgs.Hashes, Parallelism: 2}
				if meta.WriterArgs.Compression != nil {
					opts.Compression = *meta.WriterArgs.Compression
				}
				if meta.WriterArgs.SizeLimit != nil {
					opts.SizeLimit = *meta.WriterArgs.SizeLimit
				}
				w, err := NewWriter(out, opts)
				if err != nil {
					t.Fatal(err)
				}
				sc := r.RawScan(0)
				for sc.Next() {
					cols, err := sc.CurrentShard().Columns(0, sc.Record(), nil)
					if err != nil {
						t.Fatal(err)
					}
					raw := map[string][]byte{}
					for i, n := range sc.CurrentShard().ColumnNames() {
						raw[n] = cols[i]
					}
					if err := w.Write(sampleFromExpected(t, want[next], meta.WriterArgs.Columns, raw)); err != nil {
						t.Fatalf("sample %d: %v", next, err)
					}
					next++
				}
				if err := sc.Err(); err != nil {
					t.Fatal(err)
				}
				if err := w.Finish(); err != nil {
					t.Fatal(err)
				}
				compareWritten(t, src, out, r.Index())
				r.Close()
			}
			if next != len(want) {
				t.Fatalf("wrote %d samples, expected.jsonl has %d", next, len(want))
			}
		})
	}
}

// compareWritten checks index.json byte for byte (zip_data sizes and
// digests aside, as compressors differ) and every shard after
// decompression.
func compareWritten(t *testing.T, src, out string, wantIdx *format.Index) {
	t.Helper()
	gotText, err := os.ReadFile(filepath.Join(out, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	gotIdx, err := format.ParseIndex(gotText)
	if err != nil {
		t.Fatal(err)
	}
	if len(gotIdx.Shards) != len(wantIdx.Shards) {
		t.Fatalf("%d shards, want %d", len(gotIdx.Shards), len(wantIdx.Shards))
	}
	for k := range gotIdx.Shards {
		g, w := &gotIdx.Shards[k], &wantIdx.Shards[k]
		if g.ZipData != nil && w.ZipData != nil {
			g.ZipData.Bytes, g.ZipData.Hashes = w.ZipData.Bytes, w.ZipData.Hashes
		}
		rawOf := func(dir string, s *format.ShardInfo) []byte {
			if s.ZipData == nil {
				b, err := os.ReadFile(filepath.Join(dir, s.RawData.Basename))
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
			b, err := os.ReadFile(filepath.Join(dir, s.ZipData.Basename))
			if err != nil {
				t.Fatal(err)
			}
			raw, err := compress.Decompress(s.Family(), b, s.RawData.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			return raw
		}
		if !bytes.Equal(rawOf(out, g), rawOf(src, w)) {
			t.Errorf("shard %d: raw bytes differ", k)
		}
	}
	wantText, err := os.ReadFile(filepath.Join(src, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got := format.AppendIndex(nil, gotIdx); !bytes.Equal(got, wantText) {
		t.Errorf("index.json differs\n got %s\nwant %s", got, wantText)
	}
	if len(wantIdx.Shards) == 0 || wantIdx.Shards[0].ZipData == nil {
		if !bytes.Equal(gotText, wantText) {
			t.Errorf("index.json text differs")
		}
	}
}
