package wds_test

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/wds"
)

type member struct {
	name string
	data string
	typ  byte
	pax  bool
}

func makeTar(t *testing.T, ms ...member) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, m := range ms {
		typ := m.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		h := &tar.Header{Name: m.name, Typeflag: typ, Mode: 0o644, Size: int64(len(m.data))}
		if typ != tar.TypeReg {
			h.Size = 0
		}
		if m.pax {
			h.Format = tar.FormatPAX
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if typ == tar.TypeReg {
			tw.Write([]byte(m.data))
		}
	}
	tw.Close()
	return buf.Bytes()
}

// scanAll opens b both ways (Scan and OpenShard) and returns OpenShard's
// result; both must agree on failure.
func scanAll(t *testing.T, b []byte) (*wds.Shard, error) {
	t.Helper()
	_, serr := wds.Scan(bytes.NewReader(b), nil)
	sh, err := wds.OpenShard(bytes.NewReader(b), int64(len(b)), nil)
	if (serr == nil) != (err == nil) {
		t.Fatalf("Scan err %v, OpenShard err %v", serr, err)
	}
	return sh, err
}

func wantCorrupt(t *testing.T, err error, offset int64, parts ...string) {
	t.Helper()
	var ce *wds.CorruptError
	if !errors.As(err, &ce) || !errors.Is(err, format.ErrCorrupt) || !errors.Is(err, wds.ErrCorrupt) {
		t.Fatalf("error %v: want a wds.CorruptError matching format.ErrCorrupt", err)
	}
	if offset >= 0 && ce.Offset != offset {
		t.Errorf("error %v: offset %d, want %d", err, ce.Offset, offset)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not mention %q", err, p)
		}
	}
}

func TestBadMemberNames(t *testing.T) {
	ok := member{name: "a.jpg", data: "x"}
	for _, tc := range []struct {
		name string
		m    member
		why  string
	}{
		{"dotdot", member{name: "../etc/b.jpg", data: "y"}, `".."`},
		{"dotdot-inner", member{name: "x/../b.jpg", data: "y"}, `".."`},
		{"non-utf8", member{name: "b\xff.jpg", data: "y", pax: true}, "UTF-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := makeTar(t, ok, tc.m)
			_, err := scanAll(t, b)
			wantCorrupt(t, err, 1024, tc.why)
		})
	}
}

func TestDuplicateFieldIsAnError(t *testing.T) {
	// "JPG" lowercases to the "jpg" the sample already has.
	b := makeTar(t, member{name: "a.jpg", data: "x"}, member{name: "a.JPG", data: "y"})
	_, err := scanAll(t, b)
	wantCorrupt(t, err, 1024, `field "jpg" repeated`, `"a"`)
}

func TestWebDatasetGrouping(t *testing.T) {
	long := strings.Repeat("d", 150) + "/" + strings.Repeat("k", 120)
	b := makeTar(t,
		member{name: "dir/", typ: tar.TypeDir},
		member{name: "__meta__", data: "skip"},
		member{name: "__x__/a.txt", data: "skip"},
		member{name: ".hidden.jpg", data: "skip"},
		member{name: "noext", data: "skip"},
		member{name: long + ".seg.PNG", data: "p"},
		member{name: long + ".cls", data: "3"},
		member{name: "k2.", data: "empty suffix"},
		member{name: "k2.txt", data: "t"},
		member{name: "k3.jpg", data: "j", pax: true},
	)
	sh, err := scanAll(t, b)
	if err != nil {
		t.Fatal(err)
	}
	if sh.Len() != 3 {
		t.Fatalf("%d samples, want 3", sh.Len())
	}
	s, _ := sh.Sample(0)
	if s.Key != long || string(s.Fields["seg.png"]) != "p" || string(s.Fields["cls"]) != "3" || len(s.Fields) != 2 {
		t.Errorf("long-name sample: key %q fields %v", s.Key, s.Order)
	}
	s, _ = sh.Sample(1)
	if s.Key != "k2" || string(s.Fields[""]) != "empty suffix" || string(s.Fields["txt"]) != "t" {
		t.Errorf("sample 1: %q %v", s.Key, s.Order)
	}
}

func TestTruncatedAndAbsurdSizes(t *testing.T) {
	b := makeTar(t, member{name: "a.jpg", data: strings.Repeat("x", 3000)}, member{name: "b.jpg", data: "y"})
	// Members: a.jpg's header and 3000 data bytes padded to 3584, b.jpg's
	// header and 1 byte padded to 4608, then the two end blocks. A prefix
	// that stops at the end of a member's padding (or inside no block at
	// all after the last one) is a valid archive without its end blocks,
	// which tar readers accept; every other cut loses bytes and is an
	// error. A cut inside the padding after a member's data used to end
	// the archive quietly (archive/tar reads a short padding as the end),
	// dropping every member after it.
	valid := map[int]bool{0: true, 3584: true, 4608: true, 5120: true, len(b): true}
	for cut := 1; cut < len(b); cut++ {
		_, err := scanAll(t, b[:cut])
		if valid[cut] {
			if err != nil {
				t.Errorf("cut at %d (a member boundary): %v", cut, err)
			}
			continue
		}
		if !errors.Is(err, format.ErrCorrupt) {
			t.Fatalf("cut at %d: %v, want a corrupt-archive error", cut, err)
		}
		if cut > 512 && cut < 3512 {
			// Inside a.jpg's data: the member is named at its header, not
			// a header past the end (skipping readers used to say "bad tar
			// header" at offset 3584, past a cut archive).
			wantCorrupt(t, err, 0, `member "a.jpg"`, "truncated, or a forged size")
		}
		if cut > 3512 && cut < 3584 {
			wantCorrupt(t, err, int64(cut), "a.jpg", "padding", "truncated")
		}
		if cut > 4097 && cut < 4608 {
			wantCorrupt(t, err, int64(cut), "b.jpg", "padding", "truncated")
		}
	}
	// A header claiming 2^60 bytes (base-256 size field): rejected before
	// any allocation, with the member and offset named.
	huge := makeTar(t, member{name: "a.jpg", data: "x"}, member{name: "big.bin", data: "z"})
	h := huge[512*2 : 512*3]
	for i := 124; i < 136; i++ {
		h[i] = 0
	}
	h[124] = 0x80
	h[128] = 0x10 // 2^60
	var sum int64
	for i := range 512 {
		c := h[i]
		if i >= 148 && i < 156 {
			c = ' '
		}
		sum += int64(c)
	}
	copy(h[148:156], []byte(strings.Repeat("0", 0)+octal6(sum)+"\x00 "))
	_, err := scanAll(t, huge)
	wantCorrupt(t, err, 1024, "big.bin", "over limit")
	if !errors.Is(err, wds.ErrTooLarge) {
		t.Errorf("%v: want ErrTooLarge", err)
	}
}

func octal6(n int64) string {
	s := []byte("000000")
	for i := 5; i >= 0; i-- {
		s[i] = byte('0' + n%8)
		n /= 8
	}
	return string(s)
}

// TestSparseMembersRefused: a sparse member (GNU tar -S, in GNU's old
// format and PAX formats 0.0, 0.1 and 1.0) is refused with an error naming
// it, by every reader. Before, the old format's member was skipped (its
// sample silently lost a field) and the PAX ones were indexed at their
// expanded size past the archive's end (sluice dump panicked slicing it).
func TestSparseMembersRefused(t *testing.T) {
	for _, name := range []string{"sparse-gnu.tar", "sparse-pax00.tar", "sparse-pax01.tar", "sparse-pax10.tar"} {
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata", name))
			if err != nil {
				t.Fatal(err)
			}
			check := func(how string, err error) {
				t.Helper()
				if !errors.Is(err, wds.ErrUnsupported) || !errors.Is(err, format.ErrCorrupt) {
					t.Fatalf("%s: %v, want an error matching ErrUnsupported", how, err)
				}
				for _, p := range []string{"s2.bin", "sparse"} {
					if !strings.Contains(err.Error(), p) {
						t.Errorf("%s: error %q does not mention %q", how, err, p)
					}
				}
			}
			_, err = wds.OpenShard(bytes.NewReader(b), int64(len(b)), nil)
			check("OpenShard", err)
			_, err = wds.OpenShardBytes(b, nil)
			check("OpenShardBytes", err)
			_, err = wds.Scan(bytes.NewReader(b), nil)
			check("Scan", err)
			r := wds.NewReader(bytes.NewReader(b), nil)
			for r.Next() {
			}
			check("Reader", r.Err())
		})
	}
}
