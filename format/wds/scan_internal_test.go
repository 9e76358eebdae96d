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

// FuzzFastOctal: the eight-bytes-at-a-time checks of the numeric fields
// (octal8, octal12, chksumOctal, sizeOctal) accept exactly what fastOctal
// accepts, with the same value.
func FuzzFastOctal(f *testing.F) {
	for _, s := range []string{"0000644\x00", "000000012345\x00", "012345\x00 ", "00000000000 ", "   7 \x00\x00\x00", "0000008\x00", "\x80\x00\x00\x00\x00\x00\x00\x01",
		"77777777777\x00", "7777777\x00", "0000000 ", "01234567", "012345  ", "012345\x00\x00", "\x00\x00\x00\x00\x00\x00\x00\x00"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		b12 := make([]byte, 12)
		copy(b12, b)
		b8 := b12[:8]
		want8, ok8 := fastOctal(b8)
		want12, ok12 := fastOctal(b12)
		if got := octal8(b8); got != ok8 {
			t.Fatalf("octal8(%q) = %v, fastOctal %v", b8, got, ok8)
		}
		if got := octal12(b12); got != ok12 {
			t.Fatalf("octal12(%q) = %v, fastOctal %v", b12, got, ok12)
		}
		if v, ok := chksumOctal(b8); ok != ok8 || v != want8 {
			t.Fatalf("chksumOctal(%q) = %d %v, fastOctal %d %v", b8, v, ok, want8, ok8)
		}
		if v, ok := sizeOctal(b12); ok != ok12 || v != want12 {
			t.Fatalf("sizeOctal(%q) = %d %v, fastOctal %d %v", b12, v, ok, want12, ok12)
		}
	})
}
