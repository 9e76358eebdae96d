package writepipe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/mds"
	"github.com/sluicedata/sluice/internal/cputime"
)

// sampleOnly hides WriteRecord, so Run takes the format.Sample path.
type sampleOnly struct{ w *mds.Writer }

func (s sampleOnly) Write(x format.Sample) error { return s.w.Write(x) }
func (s sampleOnly) Finish() error               { return s.w.Finish() }
func (s sampleOnly) Close() error                { return s.w.Close() }

var kindCols = map[string]string{
	"a_fixed": "int", "b_bytes": "bytes", "c_str": "str", "d_i64": "int32",
	"e_f64": "float32", "f_big": "str_int", "g_nd": "ndarray:uint8", "h_ndraw": "ndarray",
	"i_strint": "str_int",
}

// kindsStream is two frames with every column kind, the second shorter.
func kindsStream() ([]string, []byte) {
	names := []string{"a_fixed", "b_bytes", "c_str", "d_i64", "e_f64", "f_big", "g_nd", "h_ndraw", "i_strint"}
	var stream []byte
	for f, n := range []int{40, 9} {
		var fb frameBuilder
		var fixed, bs, ss, i64, f64, big, nd, ndraw, si [][]byte
		for k := range n {
			x := int64(f*1000 + k)
			fixed = append(fixed, le64(x*7))
			bs = append(bs, bytes.Repeat([]byte{byte(k)}, k%5))
			ss = append(ss, []byte("héllo "+string(rune('a'+k%26))))
			i64 = append(i64, le64(-x))
			f64 = append(f64, le64(int64(math.Float64bits(float64(x)/3))))
			big = append(big, []byte("123456789012345678901234567890"))
			nd = append(nd, ndarray(8, []uint64{uint64(k%3 + 1), 2}, bytes.Repeat([]byte{7}, 2*(k%3+1))))
			ndraw = append(ndraw, append([]byte{0}, bytes.Repeat([]byte{9}, k%4)...))
			si = append(si, le64(x-20))
		}
		fb.fixed(8, fixed...)
		fb.vars(KindBytes, bs...)
		fb.vars(KindString, ss...)
		fb.body = append(fb.body, KindInt64)
		for _, v := range i64 {
			fb.body = append(fb.body, v...)
		}
		fb.body = append(fb.body, KindFloat64)
		for _, v := range f64 {
			fb.body = append(fb.body, v...)
		}
		fb.vars(KindBigInt, big...)
		fb.vars(KindNDArray, nd...)
		fb.vars(KindNDArray, ndraw...)
		fb.body = append(fb.body, KindInt64)
		for _, v := range si {
			fb.body = append(fb.body, v...)
		}
		stream = append(stream, fb.frame(n)...)
	}
	return names, append(stream, AppendHeader(nil, MagicEnd, 0, 0)...)
}

func newKindsMDS(t *testing.T, dir string) *mds.Writer {
	t.Helper()
	w, err := mds.NewWriter(dir, &mds.WriterOptions{
		Columns: kindCols, Hashes: []string{"sha1", "xxh64"}, SizeLimit: 700, Compression: "zstd", Parallelism: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// Records built straight from the frame give the same dataset, byte for
// byte, as samples written through mds.Writer.Write, for every kind.
func TestRecordPathMatchesSamplePath(t *testing.T) {
	names, stream := kindsStream()
	viaRecords, viaSamples := t.TempDir(), t.TempDir()
	w := newKindsMDS(t, viaRecords)
	if newRecordEncoder(w, names) == nil {
		t.Fatal("mds.Writer does not take the record path")
	}
	st, err := Run(context.Background(), NewReader(bytes.NewReader(stream), names, 0), w, nil)
	if err != nil || st.Samples != 49 {
		t.Fatalf("record path: %+v, %v", st, err)
	}
	if _, err := Run(context.Background(), NewReader(bytes.NewReader(stream), names, 0), sampleOnly{newKindsMDS(t, viaSamples)}, nil); err != nil {
		t.Fatalf("sample path: %v", err)
	}
	got, _ := os.ReadDir(viaRecords)
	want, _ := os.ReadDir(viaSamples)
	if len(got) != len(want) || len(got) < 3 {
		t.Fatalf("%d files vs %d", len(got), len(want))
	}
	for _, e := range want {
		a, err1 := os.ReadFile(filepath.Join(viaRecords, e.Name()))
		b, err2 := os.ReadFile(filepath.Join(viaSamples, e.Name()))
		if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
			t.Errorf("%s differs (%v, %v)", e.Name(), err1, err2)
		}
	}
}

// A value the column's encoding refuses stops the run with a SampleError
// naming the sample, and no index.json is written, on the record path.
func TestRecordPathRefusesBadValues(t *testing.T) {
	names := []string{"a", "b"}
	for _, tc := range []struct {
		name string
		bad  int64 // the refused sample
		cols map[string]string
		fb   func(*frameBuilder)
	}{
		{"fixed width", 0, map[string]string{"a": "int32", "b": "str"}, func(fb *frameBuilder) {
			fb.fixed(8, le64(1), le64(2))
			fb.vars(KindString, []byte("x"), []byte("y"))
		}},
		{"int range", 1, map[string]string{"a": "uint8", "b": "str"}, func(fb *frameBuilder) {
			fb.body = append(fb.body, KindInt64)
			fb.body = append(append(fb.body, le64(1)...), le64(300)...)
			fb.vars(KindString, []byte("x"), []byte("y"))
		}},
		{"bad ndarray", 1, map[string]string{"a": "int", "b": "ndarray"}, func(fb *frameBuilder) {
			fb.fixed(8, le64(1), le64(2))
			fb.vars(KindNDArray, ndarray(8, []uint64{1}, []byte{1}), ndarray(99, nil, nil))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			w, err := mds.NewWriter(dir, &mds.WriterOptions{Columns: tc.cols})
			if err != nil {
				t.Fatal(err)
			}
			var fb frameBuilder
			tc.fb(&fb)
			stream := append(fb.frame(2), AppendHeader(nil, MagicEnd, 0, 0)...)
			_, err = Run(context.Background(), NewReader(bytes.NewReader(stream), names, 0), w, nil)
			var se *SampleError
			if !errors.As(err, &se) || se.Index != tc.bad {
				t.Fatalf("err = %v, want a SampleError for sample %d", err, tc.bad)
			}
			if _, err := os.Stat(filepath.Join(dir, "index.json")); !os.IsNotExist(err) {
				t.Fatalf("index.json written after a refused sample: %v", err)
			}
		})
	}
}

// repeatReader yields a header-less stream: frame n times, then the end.
type repeatReader struct {
	frame []byte
	n     int
	pos   int
	ended bool
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		if r.ended {
			return 0, io.EOF
		}
		r.ended = true
		return copy(p, AppendHeader(nil, MagicEnd, 0, 0)), nil
	}
	k := copy(p, r.frame[r.pos:])
	r.pos += k
	if r.pos == len(r.frame) {
		r.pos, r.n = 0, r.n-1
	}
	return k, nil
}

// BenchmarkRunStreamSmallSamples feeds one writer b.N frames of 4096
// ~190-byte samples (zstd), as a long `sluice write` run does: the
// per-sample cost without the writer's setup, through records (the
// path Run takes for format/mds) and through format.Sample maps.
func BenchmarkRunStreamSmallSamples(b *testing.B) {
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
	benchStream(b, fb.frame(n), n)
}

// BenchmarkRunStreamLargeSamples is BenchmarkRunStreamSmallSamples with
// 64 samples of 100 KB (half random, half zeros) a frame.
func BenchmarkRunStreamLargeSamples(b *testing.B) {
	var fb frameBuilder
	const n = 64
	var arrs, ids, texts [][]byte
	rnd := make([]byte, 50_000)
	for k := range rnd {
		rnd[k] = byte(k*2654435761>>13) ^ byte(k>>7)
	}
	for k := 0; k < n; k++ {
		arrs = append(arrs, ndarray(8, []uint64{4}, []byte{1, 2, 3, 4}))
		ids = append(ids, le64(int64(k)))
		texts = append(texts, append(append([]byte(nil), rnd[k*7:]...), make([]byte, 50_000+k*7)...))
	}
	fb.vars(KindNDArray, arrs...)
	fb.fixed(8, ids...)
	fb.vars(KindBytes, texts...)
	benchStream(b, fb.frame(n), n)
}

func benchStream(b *testing.B, frame []byte, n int) {
	for _, path := range []string{"records", "samples"} {
		b.Run(path, func(b *testing.B) {
			w, err := mds.NewWriter(b.TempDir(), &mds.WriterOptions{
				Columns: map[string]string{"arr": "ndarray", "id": "int", "text": "str"}, Compression: "zstd", SizeLimit: mds.DefaultSizeLimit,
			})
			if err != nil {
				b.Fatal(err)
			}
			var sink Sink = w
			if path == "samples" {
				sink = sampleOnly{w}
			}
			b.SetBytes(int64(len(frame)))
			b.ResetTimer()
			cpu := cputime.Process()
			if _, err := Run(context.Background(), NewReader(&repeatReader{frame: frame, n: b.N}, names, 0), sink, nil); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "samples/s")
			b.ReportMetric(float64(cputime.Process()-cpu)/float64(b.N*n), "cpu-ns/sample")
		})
	}
}

// WriteRecord refuses a record whose layout does not add up and
// WriteFields fields that do not fit the columns, and the writer goes on.
func TestWriteRecordChecksLayout(t *testing.T) {
	w, err := mds.NewWriter(t.TempDir(), &mds.WriterOptions{Columns: map[string]string{"a": "int", "b": "str"}})
	if err != nil {
		t.Fatal(err)
	}
	good := append(append([]byte{2, 0, 0, 0}, le64(5)...), "hi"...)
	for _, rec := range [][]byte{nil, {1, 0}, good[:len(good)-1], append(append([]byte(nil), good...), 0)} {
		if err := w.WriteRecord(rec); err == nil {
			t.Errorf("record %x accepted", rec)
		}
	}
	if err := w.WriteRecord(good); err != nil {
		t.Fatal(err)
	}
	for _, fields := range [][][]byte{nil, {le64(5)}, {le64(5)[:4], []byte("hi")}, {le64(5), []byte("hi"), nil}} {
		if err := w.WriteFields(fields); err == nil {
			t.Errorf("fields %q accepted", fields)
		}
	}
	if err := w.WriteFields([][]byte{le64(5), []byte("hi")}); err != nil {
		t.Fatal(err)
	}
	if err := w.Finish(); err != nil || w.Shards()[0].Samples != 2 {
		t.Fatalf("finish: %v, %+v", err, w.Shards())
	}
}

// layoutSink takes fields for a real writer's columns and only checks
// their sizes.
type layoutSink struct {
	names []string
	encs  []*mds.Encoding
}

func (s *layoutSink) Columns() ([]string, []*mds.Encoding) { return s.names, s.encs }
func (s *layoutSink) Write(format.Sample) error            { return errors.New("not used") }
func (s *layoutSink) Finish() error                        { return nil }
func (s *layoutSink) Close() error                         { return nil }

func (s *layoutSink) WriteFields(fields [][]byte) error {
	if len(fields) != len(s.encs) {
		return fmt.Errorf("%d fields, layout says %d", len(fields), len(s.encs))
	}
	for i, e := range s.encs {
		if e.Size() > 0 && len(fields[i]) != e.Size() {
			return fmt.Errorf("field of %d bytes, layout says %d", len(fields[i]), e.Size())
		}
	}
	return nil
}

// Hostile frames through the record path never panic, and every record
// it hands on has the sizes of its columns.
func FuzzRecord(f *testing.F) {
	var fb frameBuilder
	fb.vars(KindNDArray, ndarray(8, []uint64{2}, []byte{1, 2}))
	fb.fixed(8, le64(3))
	fb.vars(KindBytes, []byte("abc"))
	f.Add(append(fb.frame(1), AppendHeader(nil, MagicEnd, 0, 0)...))
	fb.vars(KindNDArray, append([]byte{0}, "raw"...))
	fb.body = append(append(fb.body, KindInt64), le64(-4)...)
	fb.vars(KindString, []byte("héllo"))
	f.Add(fb.frame(1))
	w, err := mds.NewWriter(f.TempDir(), &mds.WriterOptions{
		Columns: map[string]string{"arr": "ndarray", "id": "uint8", "text": "str"},
	})
	if err != nil {
		f.Fatal(err)
	}
	defer w.Close()
	cols, encs := w.Columns()
	f.Fuzz(func(t *testing.T, stream []byte) {
		sink := &layoutSink{names: cols, encs: encs}
		_, err := Run(context.Background(), NewReader(bytes.NewReader(stream), names, 1<<16), sink, nil)
		var se *SampleError
		if err != nil && errors.As(err, &se) && strings.Contains(err.Error(), "layout says") {
			t.Fatalf("bad record layout: %v", err)
		}
	})
}
