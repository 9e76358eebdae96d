package writepipe

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/mds"
)

// frameBuilder assembles frames as the Python writers do.
type frameBuilder struct{ body []byte }

func (f *frameBuilder) fixed(width int, vals ...[]byte) {
	f.body = append(f.body, KindFixed)
	f.body = binary.LittleEndian.AppendUint32(f.body, uint32(width))
	for _, v := range vals {
		f.body = append(f.body, v...)
	}
}

func (f *frameBuilder) vars(kind byte, vals ...[]byte) {
	f.body = append(f.body, kind)
	for _, v := range vals {
		f.body = binary.LittleEndian.AppendUint32(f.body, uint32(len(v)))
	}
	for _, v := range vals {
		f.body = append(f.body, v...)
	}
}

func (f *frameBuilder) frame(n int) []byte {
	out := AppendHeader(nil, MagicBatch, uint32(n), uint64(len(f.body)))
	out = append(out, f.body...)
	f.body = nil
	return out
}

func le64(v int64) []byte { return binary.LittleEndian.AppendUint64(nil, uint64(v)) }

func ndarray(code byte, shape []uint64, data []byte) []byte {
	b := []byte{code, byte(len(shape))}
	for _, d := range shape {
		b = binary.LittleEndian.AppendUint64(b, d)
	}
	return append(b, data...)
}

var names = []string{"arr", "id", "text"}

func newMDS(t *testing.T, dir string) *mds.Writer {
	t.Helper()
	w, err := mds.NewWriter(dir, &mds.WriterOptions{
		Columns: map[string]string{"arr": "ndarray", "id": "int", "text": "str"},
		Hashes:  []string{"sha1"}, SizeLimit: 256, Parallelism: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// The same samples through frames and through mds.Writer directly give
// the same dataset, byte for byte.
func TestRunMatchesDirectWrite(t *testing.T) {
	var stream []byte
	var fb frameBuilder
	want := t.TempDir()
	direct := newMDS(t, want)
	i := 0
	for _, n := range []int{1, 7, 30} {
		var arrs, ids, texts [][]byte
		for k := 0; k < n; k++ {
			data := bytes.Repeat([]byte{byte(i)}, 4*(1+i%3))
			arrs = append(arrs, ndarray(34, []uint64{uint64(1 + i%3)}, data))
			ids = append(ids, le64(int64(i)))
			texts = append(texts, []byte("sample "+string(rune('a'+i%26))))
			err := direct.Write(format.Sample{
				"arr":  &format.NDArray{DType: "float32", Shape: []int{1 + i%3}, Data: data},
				"id":   int64(i),
				"text": "sample " + string(rune('a'+i%26)),
			})
			if err != nil {
				t.Fatal(err)
			}
			i++
		}
		fb.vars(KindNDArray, arrs...)
		fb.fixed(8, ids...)
		fb.vars(KindBytes, texts...)
		stream = append(stream, fb.frame(n)...)
	}
	stream = AppendHeader(stream, MagicEnd, 0, 0)
	if err := direct.Finish(); err != nil {
		t.Fatal(err)
	}
	got := t.TempDir()
	st, err := Run(context.Background(), NewReader(bytes.NewReader(stream), names, 0), newMDS(t, got), nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.Samples != 38 || st.Frames != 3 || st.Bytes != int64(len(stream)) {
		t.Fatalf("stats %+v, stream of %d bytes", st, len(stream))
	}
	ents, _ := os.ReadDir(want)
	for _, e := range ents {
		a, _ := os.ReadFile(filepath.Join(want, e.Name()))
		b, err := os.ReadFile(filepath.Join(got, e.Name()))
		if err != nil || !bytes.Equal(a, b) {
			t.Fatalf("%s differs (%v)", e.Name(), err)
		}
	}
	if len(ents) < 3 {
		t.Fatalf("only %d files: the size limit should cut several shards", len(ents))
	}
}

// A stream that stops without its end frame leaves shards but no index.
func TestRunUnfinishedWritesNoIndex(t *testing.T) {
	var fb frameBuilder
	var stream []byte
	for f := 0; f < 3; f++ {
		var arrs, ids, texts [][]byte
		for k := 0; k < 20; k++ {
			arrs = append(arrs, ndarray(8, []uint64{2}, []byte{1, 2}))
			ids = append(ids, le64(int64(k)))
			texts = append(texts, bytes.Repeat([]byte("x"), 40))
		}
		fb.vars(KindNDArray, arrs...)
		fb.fixed(8, ids...)
		fb.vars(KindBytes, texts...)
		stream = append(stream, fb.frame(20)...)
	}
	for _, cut := range []int{len(stream), len(stream) - 5, len(stream) - 2000} {
		dir := t.TempDir()
		_, err := Run(context.Background(), NewReader(bytes.NewReader(stream[:cut]), names, 0), newMDS(t, dir), nil)
		if !errors.Is(err, ErrUnfinished) {
			t.Fatalf("cut at %d: err = %v, want ErrUnfinished", cut, err)
		}
		if _, err := os.Stat(filepath.Join(dir, "index.json")); !os.IsNotExist(err) {
			t.Fatalf("cut at %d: index.json written (%v)", cut, err)
		}
		shards, _ := filepath.Glob(filepath.Join(dir, "shard.*.mds"))
		if len(shards) == 0 {
			t.Fatalf("cut at %d: the shards completed before the cut are gone", cut)
		}
	}
}

func TestRunRejectsBadFrames(t *testing.T) {
	var fb frameBuilder
	good := func() {
		fb.vars(KindNDArray, ndarray(8, []uint64{1}, []byte{1}))
		fb.fixed(8, le64(1))
		fb.vars(KindBytes, []byte("a"))
	}
	cases := map[string]func() []byte{
		"bad magic": func() []byte { good(); f := fb.frame(1); copy(f, "XXXX"); return f },
		"over limit": func() []byte {
			return AppendHeader(nil, MagicBatch, 1, 1<<40)
		},
		"count beyond body": func() []byte { good(); f := fb.frame(1); binary.LittleEndian.PutUint32(f[4:], 1000); return f },
		"unknown kind": func() []byte {
			fb.body = append(fb.body, 99)
			return fb.frame(1)
		},
		"trailing bytes": func() []byte { good(); fb.body = append(fb.body, 0); return fb.frame(1) },
		"ndarray data short": func() []byte {
			fb.vars(KindNDArray, ndarray(34, []uint64{4}, []byte{1, 2}))
			fb.fixed(8, le64(1))
			fb.vars(KindBytes, []byte("a"))
			return fb.frame(1)
		},
		"wrong fixed width": func() []byte {
			fb.vars(KindNDArray, ndarray(8, []uint64{1}, []byte{1}))
			fb.fixed(4, []byte{1, 2, 3, 4})
			fb.vars(KindBytes, []byte("a"))
			return fb.frame(1)
		},
	}
	for name, mk := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			stream := AppendHeader(mk(), MagicEnd, 0, 0)
			_, err := Run(context.Background(), NewReader(bytes.NewReader(stream), names, 1<<20), newMDS(t, dir), nil)
			if err == nil {
				t.Fatal("accepted")
			}
			var se *SampleError
			if !errors.Is(err, ErrFrame) && !errors.As(err, &se) {
				t.Fatalf("err = %v: neither a FrameError nor a SampleError", err)
			}
			if _, err := os.Stat(filepath.Join(dir, "index.json")); !os.IsNotExist(err) {
				t.Fatal("index.json written after a bad frame")
			}
		})
	}
}

type collect struct{ got []format.Sample }

func (c *collect) Write(s format.Sample) error {
	cp := format.Sample{}
	for k, v := range s {
		if b, ok := v.([]byte); ok {
			v = append([]byte(nil), b...)
		}
		cp[k] = v
	}
	c.got = append(c.got, cp)
	return nil
}
func (c *collect) Finish() error { return nil }
func (c *collect) Close() error  { return nil }

func TestTypedKinds(t *testing.T) {
	var fb frameBuilder
	fb.vars(KindBigInt, []byte("123456789012345678901234567890"), []byte("-5"))
	fb.body = append(fb.body, KindFloat64)
	fb.body = binary.LittleEndian.AppendUint64(fb.body, math.Float64bits(1.5))
	fb.body = binary.LittleEndian.AppendUint64(fb.body, math.Float64bits(math.Inf(-1)))
	fb.body = append(fb.body, KindInt64)
	fb.body = append(fb.body, le64(-7)...)
	fb.body = append(fb.body, le64(math.MaxInt64)...)
	fb.vars(KindString, []byte("héllo"), []byte(""))
	stream := AppendHeader(fb.frame(2), MagicEnd, 0, 0)
	var c collect
	if _, err := Run(context.Background(), NewReader(bytes.NewReader(stream), []string{"big", "f", "i", "s"}, 0), &c, nil); err != nil {
		t.Fatal(err)
	}
	if len(c.got) != 2 || c.got[0]["s"] != "héllo" || c.got[1]["i"] != int64(math.MaxInt64) ||
		c.got[1]["big"] != int64(-5) || c.got[1]["f"] != math.Inf(-1) {
		t.Fatalf("got %v", c.got)
	}
	if b, ok := c.got[0]["big"].(interface{ String() string }); !ok || b.String() != "123456789012345678901234567890" {
		t.Fatalf("big int %v", c.got[0]["big"])
	}
}

func FuzzParse(f *testing.F) {
	var fb frameBuilder
	fb.vars(KindNDArray, ndarray(8, []uint64{2}, []byte{1, 2}))
	fb.fixed(8, le64(3))
	fb.vars(KindBytes, []byte("abc"))
	f.Add(fb.frame(1))
	f.Add(AppendHeader(nil, MagicEnd, 0, 0))
	f.Fuzz(func(t *testing.T, stream []byte) {
		r := NewReader(bytes.NewReader(stream), names, 1<<16)
		var b Batch
		s := format.Sample{}
		for k := int64(0); ; k++ {
			body, n, end, err := r.Next(nil)
			if err != nil || end {
				if err != nil && !errors.Is(err, ErrFrame) && !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("unexpected error kind: %v", err)
				}
				return
			}
			if err := Parse(names, body, n, k, &b); err != nil {
				if !errors.Is(err, ErrFrame) {
					t.Fatalf("parse error does not match ErrFrame: %v", err)
				}
				return
			}
			for i := range b.Len() {
				_ = b.Fill(i, s)
			}
		}
	})
}

func BenchmarkRunSmallSamples(b *testing.B) {
	var fb frameBuilder
	const n = 4096
	var arrs, ids, texts [][]byte
	for k := 0; k < n; k++ {
		arrs = append(arrs, ndarray(8, []uint64{16}, bytes.Repeat([]byte{1}, 16)))
		ids = append(ids, le64(int64(k)))
		texts = append(texts, bytes.Repeat([]byte("t"), 160))
	}
	fb.vars(KindNDArray, arrs...)
	fb.fixed(8, ids...)
	fb.vars(KindBytes, texts...)
	frame := fb.frame(n)
	b.SetBytes(int64(len(frame)))
	for b.Loop() {
		stream := append(append([]byte(nil), frame...), AppendHeader(nil, MagicEnd, 0, 0)...)
		w, err := mds.NewWriter(b.TempDir(), &mds.WriterOptions{
			Columns: map[string]string{"arr": "ndarray", "id": "int", "text": "str"}, Compression: "zstd",
		})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Run(context.Background(), NewReader(bytes.NewReader(stream), names, 0), w, nil); err != nil {
			b.Fatal(err)
		}
	}
}
