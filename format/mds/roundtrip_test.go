package mds

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"math"
	"math/big"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/sluicedata/sluice/format"
)

// randValue returns a random value for encoding e, and the value a decoder
// must return for it (nil: same as the input).
func randValue(r *rand.Rand, e *Encoding) (in, want any) {
	switch e.kind {
	case kBytes:
		b := make([]byte, r.IntN(40))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b, nil
	case kStr:
		runes := []rune("aé😀\x00\n\"\\z€")
		var sb strings.Builder
		for n := r.IntN(20); n > 0; n-- {
			sb.WriteRune(runes[r.IntN(len(runes))])
		}
		return sb.String(), nil
	case kInt, kI64:
		return int64(r.Uint64()), nil
	case kU8:
		return uint8(r.Uint32()), nil
	case kU16:
		return uint16(r.Uint32()), nil
	case kU32:
		return r.Uint32(), nil
	case kU64:
		return r.Uint64(), nil
	case kI8:
		return int8(r.Uint32()), nil
	case kI16:
		return int16(r.Uint32()), nil
	case kI32:
		return int32(r.Uint32()), nil
	case kF16:
		return format.Float16(r.Uint32() & 0x7bff), nil // finite
	case kF32:
		return float32(r.NormFloat64() * 1e3), nil
	case kF64, kStrFloat:
		return math.Float64frombits(r.Uint64() & 0x7fefffffffffffff), nil
	case kStrInt:
		n := new(big.Int).Lsh(big.NewInt(int64(r.Uint64()>>1)), uint(r.IntN(100)))
		if r.IntN(2) == 0 {
			n.Neg(n)
		}
		return n, nil
	case kStrDecimal:
		return format.Decimal(fmt.Sprintf("%d.%03dE+%d", r.IntN(1000), r.IntN(1000), r.IntN(9))), nil
	case kJSON:
		return format.JSON(fmt.Sprintf(`{"a": [1, 2.5, null, true, "\u00e9"], "n": %d, "x": NaN}`, r.IntN(100))), nil
	case kPkl:
		return format.Pickle{0x80, 0x04, byte(r.Uint32()), '.'}, nil
	case kNDArray:
		dt := e.dtype
		if dt == "" {
			dts := []string{"uint8", "int8", "uint16", "int16", "float16", "uint32", "int32", "float32", "uint64", "int64", "float64"}
			dt = dts[r.IntN(len(dts))]
		}
		shape := e.shape
		if shape == nil {
			shape = []int{1 + r.IntN(3), 1 + r.IntN(300)}
		}
		n := 1
		for _, d := range shape {
			n *= d
		}
		data := make([]byte, n*format.DTypeSize(dt))
		for i := range data {
			data[i] = byte(r.Uint32())
		}
		return &format.NDArray{DType: dt, Shape: append([]int(nil), shape...), Data: data}, nil
	case kPIL:
		img := &format.Image{Mode: "RGB", Width: 1 + r.IntN(5), Height: 1 + r.IntN(5)}
		img.Pix = make([]byte, 3*img.Width*img.Height)
		for i := range img.Pix {
			img.Pix[i] = byte(r.Uint32())
		}
		return img, nil
	case kPNG, kListPNG:
		one := func() (*image.NRGBA, *format.Image) {
			m := image.NewNRGBA(image.Rect(0, 0, 1+r.IntN(6), 1+r.IntN(6)))
			for i := range m.Pix {
				m.Pix[i] = byte(r.Uint32())
			}
			m.Pix[3] = 128 // translucent, so the PNG is stored (and read) as RGBA
			want := &format.Image{Format: "PNG", Mode: "RGBA", Width: m.Rect.Dx(), Height: m.Rect.Dy(), Pix: m.Pix}
			return m, want
		}
		if e.kind == kPNG {
			return one()
		}
		var ins []image.Image
		var wants []*format.Image
		for n := r.IntN(3); n >= 0; n-- {
			m, w := one()
			ins, wants = append(ins, m), append(wants, w)
		}
		return ins, wants
	case kJPEG, kJPEGArray, kListJPEG:
		one := func() image.Image {
			m := image.NewGray(image.Rect(0, 0, 8, 8))
			for i := range m.Pix {
				m.Pix[i] = uint8(16 * (i % 8))
			}
			return m
		}
		if e.kind == kJPEG {
			return one(), "jpeg"
		}
		if e.kind == kListJPEG {
			return []image.Image{one(), one()}, "jpeg"
		}
		var buf bytes.Buffer
		enc, _ := ParseEncoding("jpeg")
		b, _ := enc.Append(buf.Bytes(), one())
		return [][]byte{b, b}, "jpeg"
	case kListPIL:
		v, _ := randValue(r, &Encoding{kind: kPIL})
		return []*format.Image{v.(*format.Image)}, nil
	}
	panic("no generator for " + e.text)
}

var allEncodings = []string{
	"bytes", "str", "int", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64",
	"float16", "float32", "float64", "str_int", "str_float", "str_decimal", "json", "pkl",
	"ndarray", "ndarray:float32", "ndarray:int16:2,3", "ndarray:uint8:300",
	"pil", "jpeg", "png", "jpeg_array", "jpegarray", "list[pil]", "list[jpeg]", "list[png]",
}

func checkDecoded(t *testing.T, name string, in, want, got any) {
	t.Helper()
	switch want {
	case nil:
		want = in
	case "jpeg":
		// Lossy: check the shape of the result only.
		switch g := got.(type) {
		case *format.Image:
			if g.Format != "JPEG" || g.Width != 8 || g.Mode != "L" {
				t.Fatalf("%s: decoded %+v", name, g)
			}
		case []*format.Image:
			if len(g) != 2 || g[0].Format != "JPEG" {
				t.Fatalf("%s: decoded %v", name, g)
			}
		default:
			t.Fatalf("%s: decoded %T", name, got)
		}
		return
	}
	if wi, ok := want.(*format.Image); ok && wi.Format != "" {
		gi := got.(*format.Image)
		gi.Encoded = nil
	}
	if ws, ok := want.([]*format.Image); ok && len(ws) > 0 && ws[0].Format != "" {
		for _, gi := range got.([]*format.Image) {
			gi.Encoded = nil
		}
	}
	if wf, ok := want.(float64); ok && math.IsNaN(wf) {
		if g, ok := got.(float64); !ok || !math.IsNaN(g) {
			t.Fatalf("%s: got %v, want NaN", name, got)
		}
		return
	}
	if wb, ok := want.(*big.Int); ok {
		if gb, ok := got.(*big.Int); !ok || gb.Cmp(wb) != 0 {
			t.Fatalf("%s: got %v, want %v", name, got, want)
		}
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: got %#v, want %#v", name, got, want)
	}
}

// TestRoundTripEveryEncodingAndCodec writes random samples of every
// encoding with every codec, reads them back, and compares.
func TestRoundTripEveryEncodingAndCodec(t *testing.T) {
	cols := map[string]string{}
	for i, e := range allEncodings {
		cols[fmt.Sprintf("c%02d", i)] = e
	}
	for ci, codec := range []string{"", "zstd", "zstd:9", "gz", "bz2", "snappy", "br:5"} {
		t.Run("codec="+codec, func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(ci), 7))
			dir := t.TempDir()
			w, err := NewWriter(dir, &WriterOptions{Columns: cols, Compression: codec, Hashes: []string{"sha256", "xxh3_64"}, SizeLimit: 8 << 10, Parallelism: 2})
			if err != nil {
				t.Fatal(err)
			}
			type pair struct{ in, want any }
			var samples []map[string]pair
			for n := 0; n < 40; n++ {
				s := format.Sample{}
				exp := map[string]pair{}
				for _, name := range sortedKeys(cols) {
					e, _ := ParseEncoding(cols[name])
					in, want := randValue(r, e)
					s[name], exp[name] = in, pair{in, want}
				}
				if err := w.Write(s); err != nil {
					t.Fatalf("sample %d: %v", n, err)
				}
				samples = append(samples, exp)
			}
			if err := w.Finish(); err != nil {
				t.Fatal(err)
			}
			rd, err := Open(dir, &Options{AllowUnsafeTypes: true, ValidateHash: "sha256"})
			if err != nil {
				t.Fatal(err)
			}
			defer rd.Close()
			if rd.Len() != 40 || len(rd.Index().Shards) < 3 {
				t.Fatalf("%d samples in %d shards", rd.Len(), len(rd.Index().Shards))
			}
			for i := int64(0); i < 40; i++ {
				got, err := rd.Sample(i)
				if err != nil {
					t.Fatalf("sample %d: %v", i, err)
				}
				for name, p := range samples[i] {
					checkDecoded(t, fmt.Sprintf("sample %d %s (%s)", i, name, cols[name]), p.in, p.want, got[name])
				}
			}
			var problems []error
			if _, err := Verify(t.Context(), dir, func(err error) { problems = append(problems, err) }); err != nil || len(problems) > 0 {
				t.Fatalf("verify: %v %v", err, problems)
			}
		})
	}
}

func TestWriterSizeAccounting(t *testing.T) {
	for _, limit := range []int64{300, 512, 1000, 4096} {
		dir := t.TempDir()
		w, err := NewWriter(dir, &WriterOptions{Columns: map[string]string{"b": "bytes", "i": "int"}, SizeLimit: limit})
		if err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(uint64(limit), 1))
		for n := 0; n < 200; n++ {
			if err := w.Write(format.Sample{"b": make([]byte, r.IntN(120)), "i": n}); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Finish(); err != nil {
			t.Fatal(err)
		}
		for _, s := range w.Shards() {
			fi, err := os.Stat(filepath.Join(dir, s.RawData.Basename))
			if err != nil {
				t.Fatal(err)
			}
			if fi.Size() != s.RawData.Bytes {
				t.Errorf("limit %d: %s has %d bytes, index %d", limit, s.RawData.Basename, fi.Size(), s.RawData.Bytes)
			}
			if s.Samples > 1 && fi.Size() > limit {
				t.Errorf("limit %d: %s has %d bytes", limit, s.RawData.Basename, fi.Size())
			}
		}
	}
}

// TestOversizeQuirk reproduces spec 6.3: limit 300, samples of 500 then 10
// bytes give shards of 0, 1 and 1 samples; NoEmptyShards drops the first.
func TestOversizeQuirk(t *testing.T) {
	for _, fix := range []bool{false, true} {
		dir := t.TempDir()
		w, err := NewWriter(dir, &WriterOptions{Columns: map[string]string{"b": "bytes"}, SizeLimit: 300, NoEmptyShards: fix})
		if err != nil {
			t.Fatal(err)
		}
		w.Write(format.Sample{"b": make([]byte, 500)})
		w.Write(format.Sample{"b": make([]byte, 10)})
		if err := w.Finish(); err != nil {
			t.Fatal(err)
		}
		var got []int
		for _, s := range w.Shards() {
			got = append(got, s.Samples)
		}
		want := []int{0, 1, 1}
		if fix {
			want = []int{1, 1}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("NoEmptyShards=%v: shards %v, want %v", fix, got, want)
		}
	}
}

func TestSpecWorkedExample(t *testing.T) {
	dir := t.TempDir()
	w, err := NewWriter(dir, &WriterOptions{Columns: map[string]string{"text": "str", "id": "int"}, Hashes: []string{"sha1", "xxh64"}, SizeLimit: DefaultSizeLimit})
	if err != nil {
		t.Fatal(err)
	}
	w.Write(format.Sample{"id": 7, "text": "hi"})
	w.Write(format.Sample{"id": -1, "text": "héllo"})
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	s := w.Shards()[0]
	if s.RawData.Bytes != 248 || s.RawData.Hashes["sha1"] != "ec74ea7049424d6619e7f6ce1ba4d46af480387f" || s.RawData.Hashes["xxh64"] != "0e540b88466ef21a" {
		t.Fatalf("worked example: %+v", s.RawData)
	}
}

func TestEncodingVectors(t *testing.T) {
	arr := &format.NDArray{DType: "int16", Shape: []int{2, 3}, Data: []byte{0, 0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0}}
	long := &format.NDArray{DType: "uint8", Shape: []int{300}, Data: make([]byte, 300)}
	for _, c := range []struct {
		enc  string
		v    any
		want string
	}{
		{"int", 99, "6300000000000000"},
		{"int", 987654321, "b168de3a00000000"},
		{"float16", 42, "4051"},
		{"float32", 42, "00002842"},
		{"float64", 42, "0000000000004540"},
		{"float16", 0.1, "662e"},
		{"ndarray", arr, "110802030000010002000300040005" + "00"},
		{"ndarray:int16", arr, "0802030000010002000300040005" + "00"},
		{"ndarray:int16:2,3", arr, "000001000200030004000500"},
		{"ndarray:float32", &format.NDArray{DType: "float32", Shape: []int{1}, Data: []byte{0, 0, 0xc0, 0x3f}}, "04010000c03f"},
		{"ndarray", &format.NDArray{DType: "float32", Shape: []int{1}, Data: []byte{0, 0, 0xc0, 0x3f}}, "2204010000c03f"},
		{"pil", &format.Image{Mode: "RGB", Width: 2, Height: 1, Pix: []byte{1, 2, 3, 1, 2, 3}}, "020000000100000003000000524742010203010203"},
		{"jpeg_array", [][]byte{{0xff, 0xd8, 0x61, 0x62, 0x63}, {0xff, 0xd8, 0x64}}, "020000000500000003000000ffd8616263ffd864"},
		{"list[png]", []*format.Image{}, "0000000000000000"},
		{"str_float", 1e16, "31652b3136"},
		{"str_float", 1e-5, "31652d3035"},
		{"json", map[string]any{"b": []any{1, 2.5, nil, true}, "a": "é"}, fmt.Sprintf("%x", `{"a": "\u00e9", "b": [1, 2.5, null, true]}`)},
	} {
		e, err := ParseEncoding(c.enc)
		if err != nil {
			t.Fatal(err)
		}
		got, err := e.Append(nil, c.v)
		if err != nil {
			t.Fatalf("%s %v: %v", c.enc, c.v, err)
		}
		if fmt.Sprintf("%x", got) != c.want {
			t.Errorf("%s %v: got %x want %s", c.enc, c.v, got, c.want)
		}
	}
	e, _ := ParseEncoding("ndarray")
	got, _ := e.Append(nil, long)
	if !bytes.HasPrefix(got, []byte{8, 5, 0x2c, 1}) {
		t.Errorf("u16 dims: % x", got[:4])
	}
	if e, _ := ParseEncoding("ndarray:int16:2,3"); e.Size() != 12 {
		t.Errorf("static ndarray size %d", e.Size())
	}
}

func TestEncodeRejects(t *testing.T) {
	for _, c := range []struct {
		enc string
		v   any
	}{
		{"uint8", 256}, {"uint8", -1}, {"int8", 128}, {"uint64", -1}, {"int", uint64(1 << 63)},
		{"str", 5}, {"pkl", map[string]any{}}, {"ndarray:int16:2,3", &format.NDArray{DType: "int16", Shape: []int{3, 2}, Data: make([]byte, 12)}},
		{"ndarray", &format.NDArray{DType: "bool", Shape: []int{1}, Data: []byte{1}}},
		{"ndarray", &format.NDArray{DType: "uint8", Shape: []int{}, Data: []byte{1}}},
		{"ndarray", &format.NDArray{DType: "uint8", Shape: []int{2}, Data: []byte{1}}},
		{"uint16", []byte{1}}, // pass-through still checks the fixed size
		{"str_decimal", "1.2.3"},
	} {
		e, err := ParseEncoding(c.enc)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Append(nil, c.v); err == nil {
			t.Errorf("%s accepted %#v", c.enc, c.v)
		}
	}
	for _, bad := range []string{"", "foo", "int:8", "ndarray:bool", "ndarray:int8:0", "ndarray:int8:a", "str:", "ndarray:uint8:99999,99999,99999"} {
		if _, err := ParseEncoding(bad); err == nil {
			t.Errorf("encoding %q accepted", bad)
		}
	}
}

func TestWriterOptionErrors(t *testing.T) {
	for name, o := range map[string]*WriterOptions{
		"no columns":    {},
		"bad encoding":  {Columns: map[string]string{"a": "foo"}},
		"bad codec":     {Columns: map[string]string{"a": "int"}, Compression: "lz4"},
		"unsorted hash": {Columns: map[string]string{"a": "int"}, Hashes: []string{"sha1", "md5"}},
		"bad hash":      {Columns: map[string]string{"a": "int"}, Hashes: []string{"crc32"}},
		"huge limit":    {Columns: map[string]string{"a": "int"}, SizeLimit: 1 << 32},
	} {
		if _, err := NewWriter(t.TempDir(), o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "x"), nil, 0o644)
	if _, err := NewWriter(dir, &WriterOptions{Columns: map[string]string{"a": "int"}}); err == nil {
		t.Error("non-empty directory accepted")
	}
	w, _ := NewWriter(t.TempDir(), &WriterOptions{Columns: map[string]string{"a": "int"}})
	if err := w.Write(format.Sample{"b": 1}); err == nil {
		t.Error("missing column accepted")
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
}

func TestWriterEmptyAndHook(t *testing.T) {
	dir := t.TempDir()
	var files []string
	w, err := NewWriter(dir, &WriterOptions{Columns: map[string]string{"a": "int"}, OnFileDone: func(b, p string) error {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("hook for missing %s", p)
		}
		files = append(files, b)
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "index.json"))
	if string(b) != `{"shards": [], "version": 2}` || !reflect.DeepEqual(files, []string{"index.json"}) {
		t.Fatalf("empty writer: %s, hook %v", b, files)
	}
	// A failing hook stops the writer and no index is written.
	dir = t.TempDir()
	boom := errors.New("upload failed")
	w, _ = NewWriter(dir, &WriterOptions{Columns: map[string]string{"a": "bytes"}, SizeLimit: 100, OnFileDone: func(string, string) error { return boom }})
	var werr error
	for i := 0; i < 50 && werr == nil; i++ {
		werr = w.Write(format.Sample{"a": make([]byte, 60)})
	}
	if err := w.Finish(); !errors.Is(err, boom) {
		t.Fatalf("Finish: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "index.json")); err == nil {
		t.Fatal("index.json written after a failure")
	}
}

// TestBadShards feeds malformed shards to the reader.
func TestBadShards(t *testing.T) {
	info := &format.ShardInfo{Format: "mds", Version: 2, Samples: 1, ColumnNames: []string{"a", "b"},
		ColumnEncodings: []string{"int", "str"}, ColumnSizes: []int{8, 0}}
	good := func() []byte {
		var b []byte
		b = binary.LittleEndian.AppendUint32(b, 1)
		b = binary.LittleEndian.AppendUint32(b, 12)
		b = binary.LittleEndian.AppendUint32(b, 12+4+8+2)
		b = binary.LittleEndian.AppendUint32(b, 2)
		b = binary.LittleEndian.AppendUint64(b, 7)
		return append(b, "hi"...)
	}
	set := func(b []byte, off int, v uint32) []byte {
		binary.LittleEndian.PutUint32(b[off:], v)
		return b
	}
	g := good()
	info.RawData.Bytes = int64(len(g))
	s, err := OpenBytes(g, info)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := s.Sample(0); err != nil || v["a"] != int64(7) || v["b"] != "hi" {
		t.Fatalf("good shard: %v %v", v, err)
	}
	cases := map[string][]byte{
		"truncated":          good()[:20],
		"tiny":               {1, 0},
		"absurd count":       set(good(), 0, 0xffffffff),
		"count mismatch":     set(good(), 0, 2),
		"offset past end":    set(good(), 8, 100),
		"first before table": set(good(), 4, 4),
		"out of order":       set(set(good(), 4, 20), 8, 16),
		"var size too big":   set(good(), 12, 1000),
		"trailing":           set(good(), 12, 1),
		"bad utf8":           append(good()[:24], 0xff, 0xfe),
	}
	for name, b := range cases {
		inf := *info
		inf.RawData.Bytes = int64(len(b))
		s, err := OpenBytes(b, &inf)
		if err == nil {
			_, err = s.Sample(0)
		}
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if !errors.Is(err, format.ErrCorrupt) {
			t.Errorf("%s: %v does not match ErrCorrupt", name, err)
		}
	}
	// Declared size differs from the real one.
	inf := *info
	inf.RawData.Bytes = 999
	if _, err := OpenBytes(good(), &inf); !errors.Is(err, format.ErrCorrupt) {
		t.Errorf("size mismatch: %v", err)
	}
	// Unknown encoding in the index.
	inf = *info
	inf.RawData.Bytes = int64(len(good()))
	inf.ColumnEncodings = []string{"int", "complex128"}
	if _, err := OpenBytes(good(), &inf); !errors.Is(err, format.ErrCorrupt) || !strings.Contains(err.Error(), "complex128") {
		t.Errorf("unknown encoding: %v", err)
	}
}

func TestReaderGuards(t *testing.T) {
	dir := t.TempDir()
	idx := `{"shards": [{"column_encodings": ["int"], "column_names": ["id"], "column_sizes": [8], "compression": null, "format": "mds", "hashes": [], "raw_data": {"basename": "../outside.mds", "bytes": 20, "hashes": {}}, "samples": 1, "size_limit": null, "version": 2, "zip_data": null}], "version": 2}`
	os.WriteFile(filepath.Join(dir, "index.json"), []byte(idx), 0o644)
	if _, err := Open(dir, nil); !errors.Is(err, format.ErrCorrupt) || !strings.Contains(err.Error(), "..") {
		t.Errorf("hostile basename: %v", err)
	}
	pkl := strings.ReplaceAll(strings.ReplaceAll(idx, `"int"`, `"pkl"`), "../outside.mds", "shard.00000.mds")
	pkl = strings.Replace(pkl, "[8]", "[null]", 1)
	os.WriteFile(filepath.Join(dir, "index.json"), []byte(pkl), 0o644)
	if _, err := Open(dir, nil); !errors.Is(err, ErrUnsafe) {
		t.Errorf("pkl without AllowUnsafeTypes: %v", err)
	}
	if _, err := Open(dir, &Options{AllowUnsafeTypes: true}); err != nil {
		t.Errorf("pkl with AllowUnsafeTypes: %v", err)
	}
}

func TestHashMismatch(t *testing.T) {
	dir := t.TempDir()
	w, _ := NewWriter(dir, &WriterOptions{Columns: map[string]string{"a": "str"}, Hashes: []string{"xxh64"}, Compression: "zstd"})
	w.Write(format.Sample{"a": "x"})
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "shard.00000.mds.zstd")
	b, _ := os.ReadFile(p)
	b[len(b)-1] ^= 1
	os.WriteFile(p, b, 0o644)
	r, err := Open(dir, &Options{ValidateHash: "xxh64"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Sample(0); !errors.Is(err, format.ErrCorrupt) || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("hash mismatch: %v", err)
	}
}

func TestLocate(t *testing.T) {
	dir := filepath.Join(fixturesDir, "empty_first_shard", "data")
	r, err := Open(dir, nil)
	if err != nil {
		t.Skip(err)
	}
	defer r.Close()
	for i, want := range []int{1, 2, 3, 4, 5} {
		k, j, err := r.Locate(int64(i))
		if err != nil || k != want || j != 0 {
			t.Errorf("Locate(%d) = %d, %d, %v", i, k, j, err)
		}
	}
	if k, _, _ := r.Locate(-1); k != 5 {
		t.Errorf("Locate(-1) = %d", k)
	}
	if _, _, err := r.Locate(5); err == nil {
		t.Error("Locate past the end")
	}
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestZipSizeMismatch: a compressed shard whose file size differs from the
// index (here far larger) is corrupt, reported before the file is read.
func TestZipSizeMismatch(t *testing.T) {
	dir := t.TempDir()
	w, err := NewWriter(dir, &WriterOptions{Columns: map[string]string{"a": "str"}, Compression: "zstd"})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(format.Sample{"a": "x"}); err != nil {
		t.Fatal(err)
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "shard.00000.mds.zstd")
	if err := os.Truncate(p, 1<<40); err != nil { // sparse: no disk used
		t.Skipf("cannot make a sparse file: %v", err)
	}
	r, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	_, err = r.Sample(0)
	var ce *format.CorruptError
	if !errors.As(err, &ce) || ce.File != "shard.00000.mds.zstd" || !strings.Contains(err.Error(), "1099511627776 bytes, index says") {
		t.Fatalf("oversized zip file: %v", err)
	}
}
