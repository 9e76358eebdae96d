package hashing

import (
	"strings"
	"testing"
)

func TestVectors(t *testing.T) {
	// From the spec (section 5.2) and the algorithms' published vectors.
	for name, want := range map[string]string{
		"xxh32":    "32d153ff",
		"xxh64":    "44bc2cf5ad770999",
		"xxh3_64":  "78af5f94892f3950",
		"xxh128":   "06b05ab6733a618578af5f94892f3950",
		"xxh3_128": "06b05ab6733a618578af5f94892f3950",
		"md5":      "900150983cd24fb0d6963f7d28e17f72",
		"sha1":     "a9993e364706816aba3e25717850c26c9cd0d89d",
		"sha256":   "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
		"sha3_256": "3a985da74fe225b2045c172d6bd390bd855f086e3e9d525b46bfe24511431532",
		"blake2s":  "508c5e8c327c14e2e1a72ba34eeb452f37458b209ed63a294d999b4c86675982",
	} {
		got, err := Sum(name, []byte("abc"))
		if err != nil || got != want {
			t.Errorf("%s(abc) = %s, %v; want %s", name, got, err, want)
		}
	}
	if _, err := Sum("shake_128", nil); err == nil {
		t.Error("shake_128 accepted")
	}
}

// TestXXH32Streaming feeds the same input in pieces and whole, and checks
// known vectors for the empty string and a long input.
func TestXXH32Streaming(t *testing.T) {
	if got, _ := Sum("xxh32", nil); got != "02cc5d05" {
		t.Errorf("xxh32('') = %s want 02cc5d05", got)
	}
	long := []byte(strings.Repeat("0123456789abcdef", 10) + "xyz")
	whole, _ := Sum("xxh32", long)
	for step := 1; step < 40; step++ {
		h := newXXH32()
		for i := 0; i < len(long); i += step {
			h.Write(long[i:min(i+step, len(long))])
		}
		if got := string(hexOf(h.Sum(nil))); got != whole {
			t.Fatalf("step %d: %s != %s", step, got, whole)
		}
	}
	for _, n := range Names() {
		m, err := NewMulti([]string{n})
		if err != nil {
			t.Fatal(err)
		}
		m.Write(long[:10])
		m.Write(long[10:])
		want, _ := Sum(n, long)
		if m.Sums()[n] != want {
			t.Errorf("%s: multi %s != %s", n, m.Sums()[n], want)
		}
	}
}

func hexOf(b []byte) []byte {
	const hx = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, hx[c>>4], hx[c&15])
	}
	return out
}
