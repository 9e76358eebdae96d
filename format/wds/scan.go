package wds

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"

	"github.com/zeebo/xxh3"
)

// HeaderDigest is the FileInfo.Hashes key of a shard's header digest: the
// XXH3-128 of the bytes Scan reads from a seekable archive (every header
// block, PAX and GNU long-name records, and the last byte of each member's
// data and padding, which archive/tar reads after seeking). It changes
// whenever a member is renamed, resized, re-timed or reordered, without
// reading the data. It detects change, not tampering (whoever can rewrite
// a shard can rewrite its index): a 128-bit non-cryptographic hash is
// enough for that and costs a tenth of SHA-256 on the index build's path.
const HeaderDigest = "wds_headers_xxh3_128"

// HeaderDigestSHA256 is the key of the same digest under SHA-256, which
// indexes written before HeaderDigest carry; VerifyShard checks it too.
const HeaderDigestSHA256 = "wds_headers_sha256"

// headerHash returns a new hash for the header digest key name, or nil for
// another key.
func headerHash(name string) hash.Hash {
	switch name {
	case HeaderDigest:
		return xxh3.New128()
	case HeaderDigestSHA256:
		return sha256.New()
	}
	return nil
}

// Summary is what an index records about one archive.
type Summary struct {
	// Samples is the number of samples.
	Samples int
	// FirstKey and LastKey are the keys of the first and last samples
	// ("" without samples); a key that ends one shard and starts the next
	// would be split across shards.
	FirstKey, LastKey string
	// FirstOffset and LastOffset are the header offsets of those samples.
	FirstOffset, LastOffset int64
	// Digest is the hex HeaderDigest (XXH3-128, canonical big-endian).
	Digest string
}

// Scan reads an archive's headers and returns its Summary. When r is also
// an io.Seeker, member data is skipped by seeking, so a reader backed by
// ranged requests fetches little more than the headers. Malformed archives
// give errors matching ErrCorrupt. opts may be nil.
func Scan(r io.Reader, opts *ReaderOptions) (Summary, error) {
	return scan(r, opts, HeaderDigest)
}

// scan is Scan with the digest of the key digest (HeaderDigest or
// HeaderDigestSHA256).
func scan(r io.Reader, opts *ReaderOptions, digest string) (Summary, error) {
	if rs, ok := r.(io.ReadSeeker); ok {
		// Plain USTAR/GNU headers are parsed directly, reading exactly
		// the bytes archive/tar would (so the digest is the same); on
		// anything else start again with archive/tar.
		h := headerHash(digest)
		rd := NewReader(nil, opts)
		rd.skip, rd.rs, rd.h = true, rs, h
		rd.ip, _ = r.(inPlace)
		s, err := summarize(rd, h)
		if !errors.Is(err, errFallback) {
			return s, err
		}
		if _, err := rs.Seek(0, io.SeekStart); err != nil {
			return Summary{}, fmt.Errorf("wds: rewind for a second scan: %w", err)
		}
	}
	h := headerHash(digest)
	tee := &hashReader{r: r, h: h}
	var rr io.Reader = tee
	if sk, ok := r.(io.Seeker); ok {
		rr = &hashSeeker{hashReader: tee, sk: sk}
	}
	rd := NewReader(rr, opts)
	rd.skip = true
	return summarize(rd, h)
}

// summarize runs rd to the end and returns the Summary, with h's digest.
func summarize(rd *Reader, h hash.Hash) (Summary, error) {
	var s Summary
	for rd.Next() {
		start, _ := rd.Span()
		if s.Samples == 0 {
			s.FirstKey, s.FirstOffset = rd.sample.Key, start
		}
		s.LastKey, s.LastOffset = rd.sample.Key, start
		s.Samples++
	}
	if err := rd.Err(); err != nil {
		return Summary{}, err
	}
	s.Digest = hex.EncodeToString(h.Sum(nil))
	return s, nil
}

type hashReader struct {
	r io.Reader
	h hash.Hash
}

func (t *hashReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	t.h.Write(p[:n])
	return n, err
}

type hashSeeker struct {
	*hashReader
	sk io.Seeker
}

func (t *hashSeeker) Seek(off int64, whence int) (int64, error) { return t.sk.Seek(off, whence) }
