package compress

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
)

func TestParse(t *testing.T) {
	for _, ok := range []string{"", "zstd", "zstd:1", "zstd:22", "gz:0", "gz:9", "bz2:1", "br:0", "br:11", "snappy"} {
		if _, err := Parse(ok); err != nil {
			t.Errorf("%q rejected: %v", ok, err)
		}
	}
	for _, bad := range []string{"zstd:0", "zstd:23", "lz4", "gz:-1", "snappy:1", "bz2:0", "br:12", "zstd:", "zstd:+3", "ZSTD"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	sp, _ := Parse("zstd")
	if sp.Level != 3 {
		t.Errorf("zstd default level %d", sp.Level)
	}
}

func TestRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	inputs := [][]byte{nil, []byte("a"), bytes.Repeat([]byte("hello "), 3000)}
	rnd := make([]byte, 20000)
	for i := range rnd {
		rnd[i] = byte(r.IntN(16))
	}
	inputs = append(inputs, rnd)
	for _, spec := range []string{"zstd", "zstd:19", "gz", "gz:1", "bz2", "bz2:1", "snappy", "br", "br:1"} {
		for _, in := range inputs {
			c, err := Compress(spec, in)
			if err != nil {
				t.Fatalf("%s: %v", spec, err)
			}
			sp, _ := Parse(spec)
			out, err := Decompress(sp.Family, c, int64(len(in)))
			if err != nil || !bytes.Equal(out, in) {
				t.Fatalf("%s len %d: round trip failed: %v", spec, len(in), err)
			}
			var buf bytes.Buffer
			if n, err := DecompressStream(&buf, bytes.NewReader(c), sp.Family, int64(len(in))); err != nil || n != int64(len(in)) || !bytes.Equal(buf.Bytes(), in) {
				t.Fatalf("%s len %d: stream round trip failed: %v", spec, len(in), err)
			}
			if len(in) > 0 {
				if _, err := Decompress(sp.Family, c, int64(len(in)-1)); !errors.Is(err, ErrTooLarge) {
					t.Errorf("%s len %d: bound not enforced: %v", spec, len(in), err)
				}
				buf.Reset()
				if _, err := DecompressStream(&buf, bytes.NewReader(c), sp.Family, int64(len(in)-1)); !errors.Is(err, ErrTooLarge) {
					t.Errorf("%s len %d: stream bound not enforced: %v", spec, len(in), err)
				}
			}
		}
	}
}

func TestZstdRecordsContentSize(t *testing.T) {
	for _, in := range [][]byte{nil, []byte("abc"), make([]byte, 1<<20)} {
		c, err := Compress("zstd:7", in)
		if err != nil {
			t.Fatal(err)
		}
		if !zstdHasFCS(c) {
			t.Errorf("len %d: frame has no content size", len(in))
		}
	}
}

func FuzzDecompress(f *testing.F) {
	for _, spec := range []string{"zstd", "gz", "bz2", "snappy", "br"} {
		c, _ := Compress(spec, []byte("some data some data some data"))
		f.Add(spec, c)
	}
	f.Fuzz(func(t *testing.T, family string, b []byte) {
		out, err := Decompress(family, b, 1<<16)
		if err == nil && len(out) > 1<<16 {
			t.Fatalf("bound exceeded: %d", len(out))
		}
	})
}
