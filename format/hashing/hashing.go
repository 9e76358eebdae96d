// Package hashing computes the file digests MosaicML Streaming records in
// index.json: every hashlib algorithm of standard CPython (minus shake_*)
// and every xxhash algorithm, as lowercase hex of the canonical
// (big-endian) digest.
package hashing

import (
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha3"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"hash"
	"sort"

	"github.com/cespare/xxhash/v2"
	"github.com/zeebo/xxh3"
	"golang.org/x/crypto/blake2b"
	"golang.org/x/crypto/blake2s"
)

// constructors maps each algorithm name to a hash constructor.
func newHash(name string) hash.Hash {
	switch name {
	case "blake2b":
		h, _ := blake2b.New512(nil) // unkeyed: cannot fail
		return h
	case "blake2s":
		h, _ := blake2s.New256(nil) // unkeyed: cannot fail
		return h
	case "md5":
		return md5.New()
	case "sha1":
		return sha1.New()
	case "sha224":
		return sha256.New224()
	case "sha256":
		return sha256.New()
	case "sha384":
		return sha512.New384()
	case "sha512":
		return sha512.New()
	case "sha3_224":
		return sha3.New224()
	case "sha3_256":
		return sha3.New256()
	case "sha3_384":
		return sha3.New384()
	case "sha3_512":
		return sha3.New512()
	case "xxh32":
		return newXXH32()
	case "xxh64":
		return xxhash.New()
	case "xxh3_64":
		return xxh3.New()
	case "xxh128", "xxh3_128":
		return xxh3.New128()
	}
	return nil
}

var names = []string{
	"blake2b", "blake2s", "md5", "sha1", "sha224", "sha256", "sha384", "sha512",
	"sha3_224", "sha3_256", "sha3_384", "sha3_512",
	"xxh128", "xxh32", "xxh3_128", "xxh3_64", "xxh64",
}

// Names returns every supported algorithm name, sorted.
func Names() []string {
	out := append([]string(nil), names...)
	sort.Strings(out)
	return out
}

// Valid reports whether name is a supported algorithm.
func Valid(name string) bool { return newHash(name) != nil }

// New returns a fresh hash for the algorithm name. Its Sum is the
// canonical digest, so hex of Sum is what index.json records.
func New(name string) (hash.Hash, error) {
	h := newHash(name)
	if h == nil {
		return nil, fmt.Errorf("hashing: unknown algorithm %q", name)
	}
	return h, nil
}

// Sum returns the lowercase hex digest of b under the algorithm name.
func Sum(name string, b []byte) (string, error) {
	h, err := New(name)
	if err != nil {
		return "", err
	}
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// SumAll returns the digests of b for each name, as index.json's "hashes"
// object holds them.
func SumAll(names []string, b []byte) (map[string]string, error) {
	out := make(map[string]string, len(names))
	for _, n := range names {
		d, err := Sum(n, b)
		if err != nil {
			return nil, err
		}
		out[n] = d
	}
	return out, nil
}

// Multi computes several digests in one pass over a stream.
type Multi struct {
	names  []string
	hashes []hash.Hash
}

// NewMulti returns a writer that feeds every named hash.
func NewMulti(names []string) (*Multi, error) {
	m := &Multi{names: names}
	for _, n := range names {
		h, err := New(n)
		if err != nil {
			return nil, err
		}
		m.hashes = append(m.hashes, h)
	}
	return m, nil
}

// Write feeds p to every hash; it never fails.
func (m *Multi) Write(p []byte) (int, error) {
	for _, h := range m.hashes {
		h.Write(p)
	}
	return len(p), nil
}

// Sums returns the hex digests by name.
func (m *Multi) Sums() map[string]string {
	out := make(map[string]string, len(m.names))
	for i, n := range m.names {
		out[n] = hex.EncodeToString(m.hashes[i].Sum(nil))
	}
	return out
}
