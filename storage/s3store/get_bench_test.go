package s3store_test

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/sluicedata/sluice/internal/cputime"
	"github.com/sluicedata/sluice/storage/storagetest"
)

// BenchmarkGetSmall measures the client's fixed cost of one GET: small
// objects read whole and small ranges of a larger object, one request at a
// time from the S3 server. The payload is tiny, so cpu-us/op is almost all
// the SDK's per-request work (endpoint resolution, signing, middleware)
// plus the HTTP round trip; the server's CPU is another process and is not
// counted. Every read is checked against the bytes put.
func BenchmarkGetSmall(b *testing.B) {
	s := testServer(b)
	bkt := newBucket(b, s)
	small := storagetest.Pattern(1, 1<<10)
	big := storagetest.Pattern(2, 1<<20)
	storagetest.Put(b, bkt, "small", small)
	storagetest.Put(b, bkt, "big", big)

	run := func(b *testing.B, key string, off, n int64, want []byte) {
		b.ReportAllocs()
		buf := make([]byte, 0, len(want))
		start := cputime.Process()
		for b.Loop() {
			r, err := bkt.NewRangeReader(b.Context(), key, off, n)
			if err != nil {
				b.Fatal(err)
			}
			buf = buf[:0]
			w := bytes.NewBuffer(buf)
			if _, err := io.Copy(w, r); err != nil {
				b.Fatal(err)
			}
			if err := r.Close(); err != nil {
				b.Fatal(err)
			}
			if !bytes.Equal(w.Bytes(), want) {
				b.Fatalf("%s [%d, +%d): got %d bytes, not the ones put", key, off, n, w.Len())
			}
		}
		used := cputime.Process() - start
		b.ReportMetric(float64(used/time.Nanosecond)/1e3/float64(b.N), "cpu-us/op")
	}
	b.Run("whole-1KiB", func(b *testing.B) { run(b, "small", 0, -1, small) })
	b.Run("range-1KiB", func(b *testing.B) { run(b, "big", 4096, 1<<10, big[4096:4096+1<<10]) })
}
