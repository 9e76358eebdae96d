package wds

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// slowScan is Scan through archive/tar only.
func slowScan(b []byte, opts *ReaderOptions) (Summary, error) {
	h := headerHash(HeaderDigest)
	tee := &hashReader{r: bytes.NewReader(b), h: h}
	rd := NewReader(&hashSeeker{hashReader: tee, sk: tee.r.(*bytes.Reader)}, opts)
	rd.skip = true
	return summarize(rd, h)
}

func sameScan(t *testing.T, b []byte) {
	t.Helper()
	opts := &ReaderOptions{MaxMemberSize: 1 << 20, MaxSampleSize: 2 << 20, MaxFields: 64}
	fast, ferr := Scan(bytes.NewReader(b), opts)
	slow, serr := slowScan(b, opts)
	if (ferr == nil) != (serr == nil) || (ferr != nil && ferr.Error() != serr.Error()) {
		t.Fatalf("Scan err %v, archive/tar scan err %v", ferr, serr)
	}
	if fast != slow {
		t.Fatalf("Scan %+v, archive/tar scan %+v", fast, slow)
	}
}

// TestScanDigestMatchesArchiveTar: the fast stream scan reads exactly what
// archive/tar reads, so the header digests agree, on every test archive
// and every reference fixture.
func TestScanDigestMatchesArchiveTar(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.tar"))
	more, _ := filepath.Glob(filepath.Join("..", "..", "..", "shared", "fixtures", "wds", "*", "data", "*.tar"))
	files = append(files, more...)
	var buf bytes.Buffer
	w := NewWriter(&buf)
	for i, n := range []int{0, 1, 511, 512, 513, 4096, 70000} {
		w.Write("k"+string(rune('a'+i)), map[string][]byte{"bin": make([]byte, n), "cls": []byte("1")})
	}
	w.Close()
	sameScan(t, buf.Bytes())
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sameScan(t, b)
		// Truncated at a few places, too.
		for _, cut := range []int{len(b) / 3, len(b) - 1024, len(b) - 1} {
			if cut > 0 {
				sameScan(t, b[:cut])
			}
		}
	}
}

func FuzzScanDigest(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.tar"))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { sameScan(t, b) })
}

// TestBlockSum: the lane-wise header checksum sum equals the plain sum of
// the bytes (a wrong one would not fail a scan, only send every archive
// to the slow path).
func TestBlockSum(t *testing.T) {
	var b [512]byte
	for seed := range 64 {
		for i := range b {
			switch seed {
			case 0:
				b[i] = 0xff
			case 1:
				b[i] = 0
			default:
				b[i] = byte((i+1)*(seed*7919+13) ^ i>>3*seed)
			}
		}
		var want int64
		for _, c := range b {
			want += int64(c)
		}
		if got := blockSum(&b); got != want {
			t.Fatalf("seed %d: blockSum %d, want %d", seed, got, want)
		}
	}
}
