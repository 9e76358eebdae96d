package wds

import (
	"bytes"
	"errors"
	"fmt"
	"io"
)

// sampleSpan is the index entry of one sample of a Shard.
type sampleSpan struct {
	key        string
	start, end int64
	fields     []FieldSpan
}

// Shard gives random access to the samples of one archive held in an
// io.ReaderAt. OpenShard scans the headers once; Sample then reads only the
// requested sample's bytes. A Shard is safe for concurrent use when its
// ReaderAt is.
type Shard struct {
	r       io.ReaderAt
	size    int64
	samples []sampleSpan
}

// OpenShard indexes the archive of size bytes behind r. It reads the member
// headers (and skips their data) and fails with an error matching
// ErrCorrupt on a malformed archive. opts may be nil.
func OpenShard(r io.ReaderAt, size int64, opts *ReaderOptions) (*Shard, error) {
	if size < 0 {
		return nil, fmt.Errorf("wds: negative archive size %d", size)
	}
	rd := NewReader(io.NewSectionReader(r, 0, size), opts)
	rd.skip = true
	return indexShard(rd, r, size)
}

// OpenShardBytes is OpenShard for an archive held in memory (an mmap):
// plain USTAR and GNU headers are parsed directly, which is many times
// faster; an archive with anything else (PAX or GNU extension headers,
// base-256 numbers, damage) is indexed by archive/tar, as OpenShard does,
// with the same result. The Shard reads from b.
func OpenShardBytes(b []byte, opts *ReaderOptions) (*Shard, error) {
	rd := NewReader(nil, opts)
	rd.skip, rd.mem = true, b
	s, err := indexShard(rd, bytes.NewReader(b), int64(len(b)))
	if !errors.Is(err, errFallback) {
		return s, err
	}
	return OpenShard(bytes.NewReader(b), int64(len(b)), opts)
}

// indexShard records the samples rd yields.
func indexShard(rd *Reader, r io.ReaderAt, size int64) (*Shard, error) {
	s := &Shard{r: r, size: size}
	var all []FieldSpan // every sample's spans, one allocation as it grows
	for rd.Next() {
		start, end := rd.Span()
		if end > size {
			end = size
		}
		n := len(all)
		all = append(all, rd.spans...)
		s.samples = append(s.samples, sampleSpan{
			key: rd.sample.Key, start: start, end: end,
			fields: all[n:len(all):len(all)],
		})
	}
	if err := rd.Err(); err != nil {
		return nil, err
	}
	return s, nil
}

// Len returns the number of samples in the shard.
func (s *Shard) Len() int { return len(s.samples) }

// Key returns the key of sample j.
func (s *Shard) Key(j int) (string, error) {
	if j < 0 || j >= len(s.samples) {
		return "", fmt.Errorf("wds: sample %d out of range [0, %d)", j, len(s.samples))
	}
	return s.samples[j].key, nil
}

// Span returns the byte range of sample j in the archive: its offset and
// length, from the first member's header to the end of the last member's
// padded data. The range is itself a sequence of valid tar entries.
func (s *Shard) Span(j int) (off, n int64, err error) {
	if j < 0 || j >= len(s.samples) {
		return 0, 0, fmt.Errorf("wds: sample %d out of range [0, %d)", j, len(s.samples))
	}
	sp := s.samples[j]
	return sp.start, sp.end - sp.start, nil
}

// Fields returns where each field of sample j lies in the archive, in
// archive order. The caller must not modify the slice.
func (s *Shard) Fields(j int) ([]FieldSpan, error) {
	if j < 0 || j >= len(s.samples) {
		return nil, fmt.Errorf("wds: sample %d out of range [0, %d)", j, len(s.samples))
	}
	return s.samples[j].fields, nil
}

// Sample reads sample j. The returned sample owns its bytes.
func (s *Shard) Sample(j int) (*Sample, error) {
	if j < 0 || j >= len(s.samples) {
		return nil, fmt.Errorf("wds: sample %d out of range [0, %d)", j, len(s.samples))
	}
	sp := s.samples[j]
	out := &Sample{Key: sp.key, Fields: make(map[string][]byte, len(sp.fields))}
	for _, f := range sp.fields {
		b := make([]byte, f.Size)
		if _, err := s.r.ReadAt(b, f.Offset); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("wds: sample %d (%q) field %q at offset %d: %w", j, sp.key, f.Name, f.Offset, err)
		}
		out.Fields[f.Name] = b
		out.Order = append(out.Order, f.Name)
	}
	return out, nil
}
