package storage

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
)

// sumOf returns the Checksum of b by kind, as a store would report it.
func sumOf(alg string, b []byte) Checksum {
	k := crcKinds()[alg]
	h := k.new()
	h.Write(b)
	v := make([]byte, k.width/8)
	if k.width == 64 {
		binary.BigEndian.PutUint64(v, h.Sum64())
	} else {
		binary.BigEndian.PutUint32(v, uint32(h.Sum64()))
	}
	return Checksum{Algorithm: alg, Value: v}
}

func TestCRCCombine(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for alg, k := range crcKinds() {
		for range 200 {
			a := make([]byte, rng.IntN(3000))
			b := make([]byte, rng.IntN(3000))
			for i := range a {
				a[i] = byte(rng.Uint32())
			}
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
			sum := func(p []byte) uint64 { h := k.new(); h.Write(p); return h.Sum64() }
			if got, want := k.combine(sum(a), sum(b), int64(len(b))), sum(append(a[:len(a):len(a)], b...)); got != want {
				t.Fatalf("%s: combine of %d and %d bytes = %#x, want %#x", alg, len(a), len(b), got, want)
			}
		}
	}
}

// TestRangeCheck: an object read as ranges of random sizes, in random
// order, one of them read twice, verifies against its checksum; one byte
// changed in any range is ErrChecksum; a gap or a short cover is an
// error, not a pass.
func TestRangeCheck(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	obj := make([]byte, 1<<20+17)
	for i := range obj {
		obj[i] = byte(rng.Uint32())
	}
	for _, alg := range []string{"CRC64NVME", "CRC32", "CRC32C"} {
		for trial := range 20 {
			var cuts []int64
			for off := int64(0); off < int64(len(obj)); {
				cuts = append(cuts, off)
				off += 1 + rng.Int64N(300<<10)
			}
			cuts = append(cuts, int64(len(obj)))
			order := rng.Perm(len(cuts) - 1)
			bad := -1
			if trial%2 == 1 {
				bad = rng.IntN(len(order))
			}
			rc := NewRangeCheck(sumOf(alg, obj), int64(len(obj)))
			for _, i := range order {
				part := obj[cuts[i]:cuts[i+1]]
				if i == bad {
					// A damaged attempt first, then the same damage kept
					// or not depending on the trial.
					part = bytes.Clone(part)
					part[rng.IntN(len(part))] ^= 0x40
				}
				if i%3 == 0 {
					// An earlier attempt at the same range that broke
					// midway: replaced by the one that follows.
					io.CopyN(io.Discard, rc.Reader(bytes.NewReader(obj[cuts[i]:cuts[i+1]]), cuts[i]), 1)
				}
				if _, err := io.Copy(io.Discard, rc.Reader(bytes.NewReader(part), cuts[i])); err != nil {
					t.Fatal(err)
				}
			}
			err := rc.Verify("obj")
			if bad < 0 && err != nil {
				t.Fatalf("%s, %d ranges: %v", alg, len(order), err)
			}
			if bad >= 0 && !errors.Is(err, ErrChecksum) {
				t.Fatalf("%s, range %d of %d damaged: Verify = %v, want ErrChecksum", alg, bad, len(order), err)
			}
		}
		rc := NewRangeCheck(sumOf(alg, obj), int64(len(obj)))
		rc.Add(0, obj[:1000])
		rc.Add(2000, obj[2000:])
		if err := rc.Verify("obj"); err == nil || errors.Is(err, ErrChecksum) {
			t.Fatalf("%s: a gap verified as %v", alg, err)
		}
		rc.Add(0, obj[:1000])
		if err := rc.Verify("obj"); err == nil || errors.Is(err, ErrChecksum) {
			t.Fatalf("%s: a short cover verified as %v (after the first Verify forgot the ranges)", alg, err)
		}
		// Overlapping ranges (their bytes the object's) never verify:
		// an overlap would let a range's damaged bytes be covered by
		// another's. Nor does a cover longer than the object.
		rc.Add(0, obj[:1000])
		rc.Add(500, obj[500:])
		if err := rc.Verify("obj"); err == nil || errors.Is(err, ErrChecksum) {
			t.Fatalf("%s: overlapping ranges verified as %v", alg, err)
		}
		rc.Add(0, obj)
		rc.Add(int64(len(obj)), []byte{1})
		if err := rc.Verify("obj"); err == nil || errors.Is(err, ErrChecksum) {
			t.Fatalf("%s: a cover past the object's end verified as %v", alg, err)
		}
		rc.Add(0, obj)
		if err := rc.Verify("obj"); err != nil {
			t.Fatalf("%s: one whole range: %v", alg, err)
		}
		empty := NewRangeCheck(sumOf(alg, nil), 0)
		if err := empty.Verify("empty"); err != nil {
			t.Fatalf("%s: the empty object: %v", alg, err)
		}
	}
	for _, c := range []Checksum{{}, {Algorithm: "SHA256", Value: make([]byte, 32)}, {Algorithm: "CRC32", Value: make([]byte, 8)}} {
		if rc := NewRangeCheck(c, 10); rc != nil {
			t.Fatalf("NewRangeCheck(%v) = non-nil, want nil (uncheckable)", c)
		}
	}
	var none *RangeCheck
	if none.Reader(bytes.NewReader(obj), 0) == nil || none.Verify("x") != nil {
		t.Fatal("a nil RangeCheck must pass reads through and verify nothing")
	}
}

func BenchmarkCRCCombine(b *testing.B) {
	k := crcKinds()["CRC64NVME"]
	for b.Loop() {
		k.combine(0x1234, 0x5678, 8<<20)
	}
}

// TestCheckedReader: a whole body read to its end verifies against its
// checksum (CRCs and SHAs); one byte changed makes the last Read fail with
// ErrChecksum, and every Read after; an unknown algorithm passes the bytes
// through unchecked.
func TestCheckedReader(t *testing.T) {
	data := make([]byte, 300_001)
	for i := range data {
		data[i] = byte(i * 7)
	}
	sha := sha256.Sum256(data)
	sums := []Checksum{sumOf("CRC64NVME", data), sumOf("CRC32", data), sumOf("CRC32C", data), {Algorithm: "SHA256", Value: sha[:]}}
	for _, sum := range sums {
		if got, err := io.ReadAll(CheckedReader(bytes.NewReader(data), sum, "obj")); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s: %d bytes, %v", sum.Algorithm, len(got), err)
		}
		bad := bytes.Clone(data)
		bad[123_456] ^= 1
		r := CheckedReader(bytes.NewReader(bad), sum, "obj")
		if _, err := io.ReadAll(r); !errors.Is(err, ErrChecksum) {
			t.Fatalf("%s: a damaged body read with %v, want ErrChecksum", sum.Algorithm, err)
		}
		if _, err := r.Read(make([]byte, 1)); !errors.Is(err, ErrChecksum) {
			t.Fatalf("%s: the Read after the mismatch: %v", sum.Algorithm, err)
		}
	}
	for _, sum := range []Checksum{{}, {Algorithm: "MD5", Value: make([]byte, 16)}, {Algorithm: "CRC32", Value: make([]byte, 3)}} {
		if got, err := io.ReadAll(CheckedReader(bytes.NewReader(data), sum, "obj")); err != nil || len(got) != len(data) {
			t.Fatalf("%v: unchecked read %d bytes, %v", sum, len(got), err)
		}
	}
}

// TestCRCCombineBeyond4GiB: the combine of a range longer than 2^32
// bytes (the x2n entries past 32, an object or range over 4 GiB) agrees
// with the CRC of the concatenation computed directly, for every kind.
// A second part of 2^32+5 zero bytes is hashed directly (about 1.5 s of
// CPU for the three kinds).
func TestCRCCombineBeyond4GiB(t *testing.T) {
	if testing.Short() {
		t.Skip("hashes 8 GiB per CRC")
	}
	const zeros = 1<<32 + 5
	head := []byte("a range before four GiB of zeros")
	chunk := make([]byte, 1<<20)
	for alg, k := range crcKinds() {
		whole, tail := k.new(), k.new()
		whole.Write(head)
		for left := int64(zeros); left > 0; {
			n := min(left, int64(len(chunk)))
			whole.Write(chunk[:n])
			tail.Write(chunk[:n])
			left -= n
		}
		h := k.new()
		h.Write(head)
		if got, want := k.combine(h.Sum64(), tail.Sum64(), zeros), whole.Sum64(); got != want {
			t.Errorf("%s: combine over %d bytes = %#x, want %#x", alg, int64(zeros), got, want)
		}
		// And an empty range combines into nothing.
		if got, want := k.combine(h.Sum64(), k.new().Sum64(), 0), h.Sum64(); got != want {
			t.Errorf("%s: combine with an empty range = %#x, want %#x", alg, got, want)
		}
	}
}
