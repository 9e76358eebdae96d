package stream_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"testing"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/wds"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/memstore"
	"github.com/sluicedata/sluice/stream"
)

// eofBucket records, for every range reader it hands out, whether the
// reader was read to its end before Close: a store body closed short of
// its end costs its connection (net/http tears it down).
type eofBucket struct {
	storage.Bucket
	mu            sync.Mutex
	closed, atEOF int
}

func (b *eofBucket) NewRangeReader(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	rc, err := b.Bucket.NewRangeReader(ctx, key, off, length)
	if err != nil {
		return nil, err
	}
	return &eofReader{ReadCloser: rc, b: b}, nil
}

type eofReader struct {
	io.ReadCloser
	b   *eofBucket
	eof bool
}

func (r *eofReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	if err == io.EOF {
		r.eof = true
	}
	return n, err
}

func (r *eofReader) Close() error {
	r.b.mu.Lock()
	r.b.closed++
	if r.eof {
		r.b.atEOF++
	}
	r.b.mu.Unlock()
	return r.ReadCloser.Close()
}

// TestTarIndexReadsBodiesToTheEnd: a scan that stops at the end-of-archive
// blocks, before trailing record padding (GNU tar pads archives to 10 KiB
// records), reads the rest of the body before closing it, so that the
// connection is reused; the index is the same as without padding.
func TestTarIndexReadsBodiesToTheEnd(t *testing.T) {
	ctx := context.Background()
	mb := memstore.New("data")
	var keys []string
	for i := range 3 {
		var buf bytes.Buffer
		w := wds.NewWriter(&buf)
		for j := range 40 {
			if err := w.Write(fmt.Sprintf("s%03d", j), map[string][]byte{"jpg": make([]byte, 300+j), "cls": []byte("1")}); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		plain := buf.Len()
		if i > 0 {
			// Zero padding to the next 10 KiB record.
			buf.Write(make([]byte, (10240-plain%10240)%10240))
		}
		k := fmt.Sprintf("shard-%d.tar", i)
		wr, _ := mb.NewWriter(ctx, k, nil)
		wr.Write(buf.Bytes())
		if err := wr.Close(); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	eb := &eofBucket{Bucket: mb}
	idx, err := stream.BuildTarIndex(ctx, eb, keys, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range idx.Shards {
		if s.Samples != 40 {
			t.Errorf("shard %d: %d samples, want 40", i, s.Samples)
		}
	}
	if eb.closed != len(keys) || eb.atEOF != eb.closed {
		t.Fatalf("%d of %d bodies were read to the end before Close; want all %d", eb.atEOF, eb.closed, len(keys))
	}
}

// TestTarIndexRangedMatchesInMemory: the ranged scan (headers read in
// place from the request buffer) gives what wds.Scan gives over the same
// bytes in memory, for every cut of an archive and for archives with a
// damaged header (which go to archive/tar): the same summary, or an error
// of the same kind.
func TestTarIndexRangedMatchesInMemory(t *testing.T) {
	ctx := context.Background()
	var buf bytes.Buffer
	w := wds.NewWriter(&buf)
	for j, n := range []int{0, 1, 511, 512, 513, 3000, 9000} {
		if err := w.Write(fmt.Sprintf("k%d", j), map[string][]byte{"bin": make([]byte, n), "cls": []byte("1")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	full := buf.Bytes()
	var cases [][]byte
	for cut := 0; cut <= len(full); cut += 61 {
		cases = append(cases, full[:cut])
	}
	for _, at := range []int{0, 100, 148, 156, 512 + 1024 + 7} {
		bad := bytes.Clone(full)
		bad[at] ^= 0x5a
		cases = append(cases, bad)
	}
	for i, b := range cases {
		mb := memstore.New("data")
		wr, _ := mb.NewWriter(ctx, "a.tar", nil)
		wr.Write(b)
		if err := wr.Close(); err != nil {
			t.Fatal(err)
		}
		want, werr := wds.Scan(bytes.NewReader(b), nil)
		idx, err := stream.BuildTarIndex(ctx, mb, []string{"a.tar"}, nil)
		if (err == nil) != (werr == nil) || (err != nil && errors.Is(err, wds.ErrCorrupt) != errors.Is(werr, wds.ErrCorrupt)) {
			t.Fatalf("case %d (%d bytes): ranged error %v, in memory %v", i, len(b), err, werr)
		}
		if err != nil {
			continue
		}
		got := idx.Shards[0]
		if got.Samples != want.Samples || got.RawData.Hashes[wds.HeaderDigest] != want.Digest {
			t.Fatalf("case %d (%d bytes): ranged %d samples %s, in memory %d %s", i, len(b),
				got.Samples, got.RawData.Hashes[wds.HeaderDigest], want.Samples, want.Digest)
		}
	}
}

// goldenTars are archives whose index is pinned below (computed by the
// index builder before its reads were made in place, 4ae56be): members of
// mixed sizes, dense runs and members past the ranged reader's seek gap,
// so that headers straddle its buffer and its requests restart.
func goldenTars(t *testing.T) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	x := uint32(7)
	rnd := func(n uint32) int {
		x = x*1664525 + 1013904223
		return int((x >> 8) % n)
	}
	for k := range 3 {
		var buf bytes.Buffer
		w := wds.NewWriter(&buf)
		for j := range 400 {
			n := rnd(40000)
			switch {
			case j%97 == 50:
				n = 2<<20 + 1 + rnd(2<<20) // past the seek gap and a full buffer
			case j%13 == 0:
				n = rnd(600) // around one block
			}
			body := make([]byte, n)
			for i := range body {
				body[i] = byte(i*7 + j)
			}
			if err := w.Write(fmt.Sprintf("d%d/s%05d", k, j), map[string][]byte{"jpg": body, "cls": []byte(fmt.Sprint(j))}); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		out[fmt.Sprintf("g-%d.tar", k)] = buf.Bytes()
	}
	return out
}

// choppyBucket's range readers return at most a few KiB per Read, of
// varying sizes, as a socket may.
type choppyBucket struct{ storage.Bucket }

func (b choppyBucket) NewRangeReader(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	rc, err := b.Bucket.NewRangeReader(ctx, key, off, n)
	if err != nil {
		return nil, err
	}
	return &choppyReader{ReadCloser: rc, x: uint32(off)}, nil
}

type choppyReader struct {
	io.ReadCloser
	x uint32
}

func (r *choppyReader) Read(p []byte) (int, error) {
	r.x = r.x*1664525 + 1013904223
	if n := 1 + int(r.x>>8)%9000; len(p) > n {
		p = p[:n]
	}
	return r.ReadCloser.Read(p)
}

// TestTarIndexGolden: the index of goldenTars, through whole reads and
// through reads cut short, is byte for byte the one the builder wrote
// before its reads were made in place, and each shard's entry is what
// wds.Scan gives over the bytes in memory (the copying header path).
func TestTarIndexGolden(t *testing.T) {
	ctx := context.Background()
	files := goldenTars(t)
	mb := memstore.New("data")
	var keys []string
	for k, b := range files {
		wr, _ := mb.NewWriter(ctx, k, nil)
		wr.Write(b)
		if err := wr.Close(); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, bk := range []storage.Bucket{mb, choppyBucket{mb}} {
		cb := &byteCountingBucket{Bucket: bk}
		idx, err := stream.BuildTarIndex(ctx, cb, keys, nil)
		if err != nil {
			t.Fatal(err)
		}
		// One request per shard and one after each member past the seek
		// gap (4 a shard): a scan that fell back to archive/tar, which
		// gives the same index, would read each shard a second time.
		if cb.reqs != 3*(1+4) {
			t.Errorf("%T: %d requests, want %d", bk, cb.reqs, 3*(1+4))
		}
		got := fmt.Sprintf("%x", sha256.Sum256(format.AppendIndex(nil, idx)))
		t.Logf("index sha256 %s", got)
		for i, k := range keys {
			want, err := wds.Scan(bytes.NewReader(files[k]), nil)
			if err != nil {
				t.Fatal(err)
			}
			s := idx.Shards[i]
			t.Logf("%s: %d samples, %s", k, s.Samples, s.RawData.Hashes[wds.HeaderDigest])
			if s.Samples != want.Samples || s.RawData.Hashes[wds.HeaderDigest] != want.Digest || s.RawData.Bytes != int64(len(files[k])) {
				t.Errorf("%T %s: %d samples %s (%d bytes), in memory %d %s (%d bytes)", bk, k, s.Samples,
					s.RawData.Hashes[wds.HeaderDigest], s.RawData.Bytes, want.Samples, want.Digest, len(files[k]))
			}
		}
		if got != goldenIndexSHA256 {
			t.Errorf("%T: index sha256 %s, want %s", bk, got, goldenIndexSHA256)
		}
	}
}

const goldenIndexSHA256 = "d45f56ceb1e6965ffbacc59619e9c9cec3280206a1bd5c09d4bb725f3da0483d"

// FuzzTarIndexRanged: the index build's ranged, in-place scan of any bytes,
// read whole or in short reads, gives what wds.Scan gives over them in
// memory: the same entry, or an error of the same kind.
func FuzzTarIndexRanged(f *testing.F) {
	var buf bytes.Buffer
	w := wds.NewWriter(&buf)
	for j, n := range []int{0, 1, 511, 512, 513, 3000} {
		w.Write(fmt.Sprintf("k%d", j), map[string][]byte{"bin": make([]byte, n), "cls": []byte("1")})
	}
	w.Close()
	f.Add(buf.Bytes(), false)
	f.Add(buf.Bytes()[:buf.Len()-1024], true)
	f.Fuzz(func(t *testing.T, b []byte, choppy bool) {
		ctx := context.Background()
		mb := memstore.New("data")
		wr, _ := mb.NewWriter(ctx, "a.tar", nil)
		wr.Write(b)
		if err := wr.Close(); err != nil {
			t.Fatal(err)
		}
		var bk storage.Bucket = mb
		if choppy {
			bk = choppyBucket{mb}
		}
		opts := &wds.ReaderOptions{MaxMemberSize: 1 << 20, MaxSampleSize: 2 << 20, MaxFields: 64}
		want, werr := wds.Scan(bytes.NewReader(b), opts)
		idx, err := stream.BuildTarIndex(ctx, bk, []string{"a.tar"}, &stream.TarIndexOptions{Reader: opts})
		if (err == nil) != (werr == nil) || (err != nil && errors.Is(err, wds.ErrCorrupt) != errors.Is(werr, wds.ErrCorrupt)) {
			t.Fatalf("ranged error %v, in memory %v", err, werr)
		}
		if err != nil {
			return
		}
		if got := idx.Shards[0]; got.Samples != want.Samples || got.RawData.Hashes[wds.HeaderDigest] != want.Digest {
			t.Fatalf("ranged %d samples %s, in memory %d %s", got.Samples, got.RawData.Hashes[wds.HeaderDigest], want.Samples, want.Digest)
		}
	})
}
