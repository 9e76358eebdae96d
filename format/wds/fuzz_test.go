package wds_test

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicedata/sluice/format/wds"
)

// FuzzReader feeds arbitrary bytes to the Reader and to OpenShard. Neither
// may panic, both must agree, and whatever decodes must survive a write and
// a second read unchanged.
func FuzzReader(f *testing.F) {
	addTarSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		opts := &wds.ReaderOptions{MaxMemberSize: 1 << 20, MaxSampleSize: 2 << 20, MaxFields: 64}
		r := wds.NewReader(bytes.NewReader(b), opts)
		var samples []wds.Sample
		for r.Next() {
			samples = append(samples, *r.Sample())
		}
		sh, shErr := wds.OpenShard(bytes.NewReader(b), int64(len(b)), opts)
		if (r.Err() == nil) != (shErr == nil) {
			t.Fatalf("Reader err %v, OpenShard err %v", r.Err(), shErr)
		}
		fast, fastErr := wds.OpenShardBytes(b, opts)
		if (fastErr == nil) != (shErr == nil) || (fastErr != nil && fastErr.Error() != shErr.Error()) {
			t.Fatalf("OpenShardBytes err %v, OpenShard err %v", fastErr, shErr)
		}
		sum, scanErr := wds.Scan(bytes.NewReader(b), opts)
		if (scanErr == nil) != (shErr == nil) {
			t.Fatalf("Scan err %v, OpenShard err %v", scanErr, shErr)
		}
		if r.Err() != nil {
			return
		}
		if sum.Samples != sh.Len() || fast.Len() != sh.Len() {
			t.Fatalf("Scan %d samples, OpenShardBytes %d, OpenShard %d", sum.Samples, fast.Len(), sh.Len())
		}
		for j := range sh.Len() {
			a, _ := sh.Fields(j)
			b, _ := fast.Fields(j)
			o1, n1, _ := sh.Span(j)
			o2, n2, _ := fast.Span(j)
			k1, _ := sh.Key(j)
			k2, _ := fast.Key(j)
			if k1 != k2 || o1 != o2 || n1 != n2 || len(a) != len(b) {
				t.Fatalf("sample %d: OpenShardBytes %q %d+%d, OpenShard %q %d+%d", j, k2, o2, n2, k1, o1, n1)
			}
			for i := range a {
				if a[i] != b[i] {
					t.Fatalf("sample %d field %d: %+v vs %+v", j, i, b[i], a[i])
				}
			}
		}
		if sh.Len() != len(samples) {
			t.Fatalf("OpenShard has %d samples, Reader %d", sh.Len(), len(samples))
		}
		for j := range samples {
			s, err := sh.Sample(j)
			if err != nil {
				t.Fatal(err)
			}
			if s.Key != samples[j].Key || len(s.Fields) != len(samples[j].Fields) {
				t.Fatalf("sample %d differs between Reader and Shard", j)
			}
			for k, v := range s.Fields {
				if !bytes.Equal(v, samples[j].Fields[k]) {
					t.Fatalf("sample %d field %q differs between Reader and Shard", j, k)
				}
			}
		}
		var buf bytes.Buffer
		w := wds.NewWriter(&buf)
		var written []wds.Sample
		for _, s := range samples {
			if err := w.Write(s.Key, s.Fields); err != nil {
				continue // keys the writer refuses (e.g. "..") are fine to skip
			}
			written = append(written, s)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		again := wds.NewReader(bytes.NewReader(buf.Bytes()), opts)
		i := 0
		for again.Next() {
			s := again.Sample()
			if i >= len(written) || s.Key != written[i].Key || len(s.Fields) != len(written[i].Fields) {
				t.Fatalf("re-read sample %d differs", i)
			}
			i++
		}
		if again.Err() != nil || i != len(written) {
			t.Fatalf("re-read: %d samples of %d, err %v", i, len(written), again.Err())
		}
	})
}

// inPlaceReader is a bytes.Reader with the in-place reads (Next) of
// stream's ranged store reader, so that Scan takes its in-place header
// path.
type inPlaceReader struct {
	*bytes.Reader
	data []byte
}

func (r *inPlaceReader) Next(n int) ([]byte, error) {
	pos, _ := r.Seek(0, io.SeekCurrent)
	if pos >= int64(len(r.data)) {
		return nil, io.EOF
	}
	end := min(pos+int64(n), int64(len(r.data)))
	r.Seek(end, io.SeekStart)
	if end-pos < int64(n) {
		return r.data[pos:end], io.ErrUnexpectedEOF
	}
	return r.data[pos:end], nil
}

// FuzzScanInPlace: Scan over a stream with in-place reads gives exactly
// what it gives over the same bytes read by copying (summary, digest and
// error), and agrees with archive/tar (a stream that cannot seek) on
// whether the archive is good and on its samples.
func FuzzScanInPlace(f *testing.F) {
	addTarSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		opts := &wds.ReaderOptions{MaxMemberSize: 1 << 20, MaxSampleSize: 2 << 20, MaxFields: 64}
		want, werr := wds.Scan(bytes.NewReader(b), opts)
		got, err := wds.Scan(&inPlaceReader{Reader: bytes.NewReader(b), data: b}, opts)
		if (err == nil) != (werr == nil) || (err != nil && err.Error() != werr.Error()) || got != want {
			t.Fatalf("in place %+v, %v; copying %+v, %v", got, err, want, werr)
		}
		plain, perr := wds.Scan(struct{ io.Reader }{bytes.NewReader(b)}, opts)
		if (perr == nil) != (err == nil) {
			t.Fatalf("in place err %v, archive/tar err %v", err, perr)
		}
		plain.Digest = got.Digest
		if err == nil && plain != got {
			t.Fatalf("in place %+v, archive/tar %+v", got, plain)
		}
	})
}

// addTarSeeds seeds f with the test archives in testdata.
func addTarSeeds(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.tar"))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}
