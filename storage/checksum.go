package storage

import (
	"bytes"
	"cmp"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"slices"
	"sync"

	"github.com/minio/crc64nvme"
)

// Checksum is the checksum a store keeps for a whole object, as Stat
// reports it: Algorithm is the store's name for it ("CRC64NVME",
// "CRC32", "CRC32C", "SHA256", "MD5", ...), Value its big-endian bytes.
// The zero Checksum means the store reported none.
type Checksum struct {
	Algorithm string
	Value     []byte
}

// IsZero reports whether c carries no checksum.
func (c Checksum) IsZero() bool { return c.Algorithm == "" || len(c.Value) == 0 }

// String returns c as "ALG:base64", the form S3 sends it in.
func (c Checksum) String() string {
	if c.IsZero() {
		return "none"
	}
	return c.Algorithm + ":" + base64.StdEncoding.EncodeToString(c.Value)
}

// A crcKind is a reflected CRC with all-ones initial value and final
// inversion (CRC-32, CRC-32C, CRC-64/NVME): the CRC of a concatenation is
// then a function of the parts' CRCs and the second part's length, which
// lets an object read in parallel ranges be checked against its
// whole-object checksum without reading it again.
type crcKind struct {
	width int    // 32 or 64
	poly  uint64 // reflected polynomial
	new   func() hash.Hash64
	x2n   [67]uint64 // x^(2^k) mod poly, for shifts by up to 2^64 bytes
}

func newCRCKind(width int, poly uint64, mk func() hash.Hash64) *crcKind {
	k := &crcKind{width: width, poly: poly, new: mk}
	p := uint64(1) << (width - 2) // x^1: the reflected representation of x
	for i := range k.x2n {
		k.x2n[i] = p
		p = k.mul(p, p)
	}
	return k
}

// mul multiplies a and b modulo the polynomial, both in the reflected
// representation where the top bit (of width) is x^0.
func (k *crcKind) mul(a, b uint64) uint64 {
	var prod uint64
	for bit := uint64(1) << (k.width - 1); bit != 0; bit >>= 1 {
		if a&bit != 0 {
			prod ^= b
		}
		// b *= x
		if b&1 != 0 {
			b = b>>1 ^ k.poly
		} else {
			b >>= 1
		}
	}
	return prod
}

// combine returns the CRC of A||B from crcA, crcB and len(B): crcA
// shifted over len(B) bytes of zeros (x^(8·len) mod poly), plus crcB.
func (k *crcKind) combine(crcA, crcB uint64, lenB int64) uint64 {
	shift := uint64(1) << (k.width - 1) // x^0
	n := uint64(lenB)
	for i := 3; n != 0; i++ { // 8·lenB bits = lenB · 2^3
		if n&1 != 0 {
			shift = k.mul(k.x2n[i], shift)
		}
		n >>= 1
	}
	return k.mul(shift, crcA) ^ crcB
}

// crcKinds are the combinable checksums stores keep, by their S3 names
// (GCS keeps CRC32C for every object).
var crcKinds = sync.OnceValue(func() map[string]*crcKind {
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	return map[string]*crcKind{
		"CRC64NVME": newCRCKind(64, 0x9a6c9329ac4bc9b5, func() hash.Hash64 { return crc64nvme.New() }),
		"CRC32":     newCRCKind(32, 0xedb88320, func() hash.Hash64 { return crc32Hash{crc32.NewIEEE()} }),
		"CRC32C":    newCRCKind(32, 0x82f63b78, func() hash.Hash64 { return crc32Hash{crc32.New(castagnoli)} }),
	}
})

// crc32Hash gives a hash.Hash32 the Sum64 of a hash.Hash64.
type crc32Hash struct{ hash.Hash32 }

func (h crc32Hash) Sum64() uint64 { return uint64(h.Sum32()) }

// RangeCheck checks an object read as ranges, in parallel and in any
// order, against the whole-object checksum its store keeps: each range's
// bytes pass through Reader, and Verify combines the ranges' CRCs and
// compares. Reader and Add are safe for concurrent use; Verify must
// follow the end of every range's reads.
type RangeCheck struct {
	kind *crcKind
	want uint64
	sum  Checksum
	size int64

	mu    sync.Mutex
	parts []*rangeReader
}

// NewRangeCheck returns a RangeCheck of an object of size bytes against
// sum, or nil when sum is absent or of a kind that ranges cannot be
// checked against (a cryptographic hash, or a checksum of parts).
func NewRangeCheck(sum Checksum, size int64) *RangeCheck {
	k := crcKinds()[sum.Algorithm]
	if k == nil || len(sum.Value) != k.width/8 {
		return nil
	}
	var want uint64
	if k.width == 64 {
		want = binary.BigEndian.Uint64(sum.Value)
	} else {
		want = uint64(binary.BigEndian.Uint32(sum.Value))
	}
	return &RangeCheck{kind: k, want: want, sum: sum, size: size}
}

// Reader returns r with the bytes read through it summed as the range
// that starts at off. A range read again (an attempt that failed midway)
// replaces the earlier one. A nil RangeCheck returns r.
func (rc *RangeCheck) Reader(r io.Reader, off int64) io.Reader {
	if rc == nil {
		return r
	}
	rr := &rangeReader{r: r, off: off, h: rc.kind.new()}
	rc.add(rr)
	return rr
}

// Add records b, already in memory, as the range that starts at off.
func (rc *RangeCheck) Add(off int64, b []byte) {
	if rc == nil {
		return
	}
	rr := &rangeReader{off: off, n: int64(len(b)), h: rc.kind.new()}
	rr.h.Write(b)
	rc.add(rr)
}

func (rc *RangeCheck) add(rr *rangeReader) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for i, p := range rc.parts {
		if p.off == rr.off {
			rc.parts[i] = rr
			return
		}
	}
	rc.parts = append(rc.parts, rr)
}

type rangeReader struct {
	r   io.Reader
	off int64
	n   int64
	h   hash.Hash64
}

func (rr *rangeReader) Read(p []byte) (int, error) {
	n, err := rr.r.Read(p)
	if n > 0 {
		rr.h.Write(p[:n])
		rr.n += int64(n)
	}
	return n, err
}

// Verify combines the recorded ranges, which must cover the object from
// 0 to its size without gaps or overlaps, and compares the result with
// the store's checksum; name is the object's name for the error. A
// mismatch wraps ErrChecksum. Verify forgets the ranges, so that the
// object can be read again through the same RangeCheck. A nil RangeCheck
// verifies nothing.
func (rc *RangeCheck) Verify(name string) error {
	if rc == nil {
		return nil
	}
	rc.mu.Lock()
	parts := rc.parts
	rc.parts = nil
	rc.mu.Unlock()
	slices.SortFunc(parts, func(a, b *rangeReader) int { return cmp.Compare(a.off, b.off) })
	crc := rc.kind.new().Sum64() // the empty object's
	var at int64
	for i, p := range parts {
		if p.off != at {
			return fmt.Errorf("storage: check %s: ranges cover its first %d bytes, the next starts at %d", name, at, p.off)
		}
		if i == 0 {
			crc = p.h.Sum64()
		} else {
			crc = rc.kind.combine(crc, p.h.Sum64(), p.n)
		}
		at += p.n
	}
	if at != rc.size {
		return fmt.Errorf("storage: check %s: ranges cover %d of its %d bytes", name, at, rc.size)
	}
	if crc != rc.want {
		got := make([]byte, rc.kind.width/8)
		if rc.kind.width == 64 {
			binary.BigEndian.PutUint64(got, crc)
		} else {
			binary.BigEndian.PutUint32(got, uint32(crc))
		}
		return fmt.Errorf("storage: %s: its ranges' %s is %s, the store's %s: %w", name, rc.sum.Algorithm,
			base64.StdEncoding.EncodeToString(got), base64.StdEncoding.EncodeToString(rc.sum.Value), ErrChecksum)
	}
	return nil
}

// newHash returns a fresh hash of c's algorithm, or nil for one storage
// does not compute.
func (c Checksum) newHash() hash.Hash {
	if k := crcKinds()[c.Algorithm]; k != nil {
		return k.new()
	}
	switch c.Algorithm {
	case "SHA256":
		return sha256.New()
	case "SHA1":
		return sha1.New()
	}
	return nil
}

// CheckedReader returns r checked against sum, the store's checksum of the
// whole object that r reads from its start: the Read that reaches io.EOF
// returns instead an error matching ErrChecksum, naming name, when the
// bytes read differ. A zero sum, or one of an algorithm storage does not
// compute, returns r unchecked.
func CheckedReader(r io.Reader, sum Checksum, name string) io.Reader {
	h := sum.newHash()
	if h == nil || len(sum.Value) != h.Size() {
		return r
	}
	return &sumReader{r: r, h: h, sum: sum, name: name}
}

// CheckedBody is CheckedReader for a response body: Close closes body. It
// returns body itself when there is nothing to check against.
func CheckedBody(body io.ReadCloser, sum Checksum, name string) io.ReadCloser {
	r, ok := CheckedReader(body, sum, name).(*sumReader)
	if !ok {
		return body
	}
	return &sumBody{sumReader: r, body: body}
}

// sumBody is a checked response body. Its continuation (ContinueCheck,
// promoted) is a plain reader: the retry decorator closes the broken body
// itself.
type sumBody struct {
	*sumReader
	body io.Closer
}

func (b *sumBody) Close() error { return b.body.Close() }

type sumReader struct {
	r    io.Reader
	h    hash.Hash
	sum  Checksum
	name string
	err  error // sticky: the mismatch
}

func (c *sumReader) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.r.Read(p)
	c.h.Write(p[:n])
	if err == io.EOF {
		if got := c.h.Sum(nil); !bytes.Equal(got, c.sum.Value) {
			c.err = fmt.Errorf("storage: %s: the body's %s is %s, the store's %s: %w", c.name, c.sum.Algorithm,
				base64.StdEncoding.EncodeToString(got), base64.StdEncoding.EncodeToString(c.sum.Value), ErrChecksum)
			return n, c.err
		}
	}
	return n, err
}
