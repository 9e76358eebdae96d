package mds

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/internal/mmap"
)

// MaxShardBytes is the largest raw shard: offsets are u32 file positions.
const MaxShardBytes = 1<<32 - 1

// firstRead is how much of a shard OpenShard reads first.
const firstRead = 64 << 10

// Shard is one opened raw (uncompressed) MDS shard. It validates the header
// and offset table when opened, so each sample is then found in O(1).
//
// A Shard is safe for concurrent use, except Close.
type Shard struct {
	file   string
	id     int
	data   []byte      // whole file when in memory or mapped
	ra     io.ReaderAt // otherwise
	size   int64
	n      int
	offs   []byte // 4·(n+1) bytes of u32 offsets
	cols   []*Encoding
	names  []string
	fixed  []int
	nvar   int
	closer io.Closer
}

var _ format.Shard = (*Shard)(nil)

// OpenShard opens a raw MDS shard of size bytes read through r. info (the
// shard's index entry) gives the columns and the expected sample count and
// size; with a nil info the columns come from the shard's own header.
//
// The header and offset table are read and validated against size before
// anything sized by them is allocated. Records are read with ReadAt on
// demand (one allocation each); use OpenBytes or OpenFile for views without
// copies.
func OpenShard(r io.ReaderAt, size int64, info *format.ShardInfo) (*Shard, error) {
	s := &Shard{ra: r, size: size, id: -1}
	if info != nil {
		s.file = info.RawData.Basename
	}
	if err := s.init(info); err != nil {
		return nil, err
	}
	return s, nil
}

// OpenBytes opens a raw MDS shard held in memory. Records are views of b.
func OpenBytes(b []byte, info *format.ShardInfo) (*Shard, error) {
	s := &Shard{data: b, size: int64(len(b)), id: -1}
	if info != nil {
		s.file = info.RawData.Basename
	}
	if err := s.init(info); err != nil {
		return nil, err
	}
	return s, nil
}

// OpenFile maps the raw shard file at path read-only and opens it. Records
// are views of the mapping, valid until Close.
func OpenFile(path string, info *format.ShardInfo) (*Shard, error) {
	m, err := mmap.Open(path)
	if err != nil {
		return nil, fmt.Errorf("mds: open shard: %w", err)
	}
	s := &Shard{data: m.Bytes(), size: m.Len(), id: -1, closer: m, file: path}
	if info != nil {
		s.file = info.RawData.Basename
	}
	if err := s.init(info); err != nil {
		m.Close()
		return nil, err
	}
	return s, nil
}

func (s *Shard) corrupt(sample int, off int64, format_ string, args ...any) *format.CorruptError {
	return &format.CorruptError{File: s.file, Shard: s.id, Sample: sample, Offset: off, Reason: fmt.Sprintf(format_, args...)}
}

func (s *Shard) readAt(off, n int64) ([]byte, error) {
	if off < 0 || n < 0 || off+n > s.size {
		return nil, s.corrupt(-1, off, "read of %d bytes past the end of the %d-byte file", n, s.size)
	}
	if s.data != nil {
		return s.data[off : off+n], nil
	}
	b := make([]byte, n)
	if _, err := s.ra.ReadAt(b, off); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, s.corrupt(-1, off, "file shorter than its declared %d bytes", s.size)
		}
		return nil, fmt.Errorf("mds: read %s at %d: %w", s.file, off, err)
	}
	return b, nil
}

func (s *Shard) init(info *format.ShardInfo) error {
	if s.size < 8 {
		return s.corrupt(-1, 0, "file of %d bytes is shorter than the smallest shard", s.size)
	}
	if s.size > MaxShardBytes {
		return s.corrupt(-1, -1, "file of %d bytes exceeds the 4 GiB shard limit", s.size)
	}
	if info != nil && info.RawData.Bytes != s.size {
		return s.corrupt(-1, -1, "file has %d bytes, index says %d", s.size, info.RawData.Bytes)
	}
	// One read covers the count, and usually the whole offset table and
	// config: a single ranged request for remote readers.
	hdr, err := s.readAt(0, min(s.size, firstRead))
	if err != nil {
		return err
	}
	n := int64(binary.LittleEndian.Uint32(hdr))
	if 8+4*n > s.size {
		return s.corrupt(-1, 0, "sample count %d does not fit in a %d-byte file", n, s.size)
	}
	if info != nil && int64(info.Samples) != n {
		return s.corrupt(-1, 0, "shard holds %d samples, index says %d", n, info.Samples)
	}
	s.n = int(n)
	if 8+4*n <= int64(len(hdr)) {
		s.offs = hdr[4 : 8+4*n]
	} else if s.offs, err = s.readAt(4, 4*(n+1)); err != nil {
		return err
	}
	le := binary.LittleEndian
	first := int64(le.Uint32(s.offs))
	if first < 8+4*n || first > s.size {
		return s.corrupt(-1, 4, "first sample offset %d is outside [%d, %d]", first, 8+4*n, s.size)
	}
	prev := first
	for i := 1; i <= s.n; i++ {
		o := int64(le.Uint32(s.offs[4*i:]))
		if o < prev {
			return s.corrupt(i-1, int64(4+4*i), "offset %d is before the previous offset %d", o, prev)
		}
		prev = o
	}
	if prev != s.size {
		return s.corrupt(-1, 4+4*n, "last offset %d is not the file size %d", prev, s.size)
	}
	if info == nil {
		var cfg []byte
		if first <= int64(len(hdr)) {
			cfg = hdr[8+4*n : first]
		} else if cfg, err = s.readAt(8+4*n, first-(8+4*n)); err != nil {
			return err
		}
		if info, err = parseConfig(cfg); err != nil {
			return &format.CorruptError{File: s.file, Shard: s.id, Sample: -1, Offset: 8 + 4*n, Reason: "bad header config", Err: err}
		}
	}
	return s.setColumns(info)
}

// parseConfig reads the writer configuration embedded in a shard header.
func parseConfig(b []byte) (*format.ShardInfo, error) {
	// Reuse the index parser: wrap the config as a one-shard index with a
	// placeholder file description.
	v, err := format.ParseJSON(b)
	if err != nil {
		return nil, err
	}
	obj, ok := v.(*format.JSONObject)
	if !ok {
		return nil, errors.New("config is not an object")
	}
	obj.Values["raw_data"] = &format.JSONObject{Keys: []string{"basename", "bytes"},
		Values: map[string]any{"basename": "shard", "bytes": format.JSONNumber("0")}}
	obj.Values["samples"] = format.JSONNumber("0")
	obj.Values["zip_data"] = nil
	obj.Keys = append(obj.Keys, "raw_data", "samples", "zip_data")
	if c, ok := obj.Values["compression"].(string); ok && c != "" {
		obj.Values["zip_data"] = obj.Values["raw_data"]
	}
	text, err := format.AppendJSON(nil, &format.JSONObject{Keys: []string{"shards", "version"},
		Values: map[string]any{"shards": []any{obj}, "version": format.JSONNumber("2")}}, false)
	if err != nil {
		return nil, err
	}
	idx, err := format.ParseIndex(text)
	if err != nil {
		return nil, err
	}
	return &idx.Shards[0], nil
}

func (s *Shard) setColumns(info *format.ShardInfo) error {
	if info.Format != "mds" {
		return s.corrupt(-1, -1, "format is %q, not mds", info.Format)
	}
	s.names = info.ColumnNames
	s.cols = make([]*Encoding, len(info.ColumnEncodings))
	s.fixed = make([]int, len(s.cols))
	for i, es := range info.ColumnEncodings {
		e, err := ParseEncoding(es)
		if err != nil {
			return &format.CorruptError{File: s.file, Shard: s.id, Sample: -1, Offset: -1, Reason: fmt.Sprintf("column %q", s.names[i]), Err: err}
		}
		s.cols[i] = e
		if i < len(info.ColumnSizes) && info.ColumnSizes[i] != e.Size() {
			return s.corrupt(-1, -1, "column %q has size %d in the index but %d by its encoding %s", s.names[i], info.ColumnSizes[i], e.Size(), es)
		}
		s.fixed[i] = e.Size()
		if e.Size() == 0 {
			s.nvar++
		}
	}
	return nil
}

// Len returns the number of samples.
func (s *Shard) Len() int { return s.n }

// Size returns the raw file size.
func (s *Shard) Size() int64 { return s.size }

// ColumnNames returns the column names in record order (sorted). The
// slice must not be modified.
func (s *Shard) ColumnNames() []string { return s.names }

// Encodings returns the column encodings aligned with ColumnNames. The
// slice must not be modified.
func (s *Shard) Encodings() []*Encoding { return s.cols }

// Span returns the byte range of sample j's record in the raw file.
func (s *Shard) Span(j int) (off, n int64, err error) {
	if j < 0 || j >= s.n {
		return 0, 0, fmt.Errorf("mds: %s: sample %d out of range [0, %d)", s.file, j, s.n)
	}
	le := binary.LittleEndian
	begin := int64(le.Uint32(s.offs[4*j:]))
	end := int64(le.Uint32(s.offs[4*j+4:]))
	return begin, end - begin, nil
}

// Record returns sample j's record bytes: a view of the shard for OpenBytes
// and OpenFile shards (valid until Close, must not be modified), a fresh
// slice for OpenShard.
func (s *Shard) Record(j int) ([]byte, error) {
	off, n, err := s.Span(j)
	if err != nil {
		return nil, err
	}
	if s.data != nil {
		return s.data[off : off+n : off+n], nil
	}
	return s.readAt(off, n)
}

// Columns splits record rec of sample j into its column values' encoded
// bytes (views of rec), appended to dst in column order. Errors match
// format.ErrCorrupt.
func (s *Shard) Columns(j int, rec []byte, dst [][]byte) ([][]byte, error) {
	hdr := 4 * s.nvar
	if len(rec) < hdr {
		return dst, s.corrupt(j, s.recordOffset(j), "record of %d bytes is shorter than its %d-byte size table", len(rec), hdr)
	}
	le := binary.LittleEndian
	pos, v := hdr, 0
	for i, fixed := range s.fixed {
		size := fixed
		if size == 0 {
			size = int(le.Uint32(rec[4*v:]))
			v++
		}
		if size > len(rec)-pos {
			return dst, s.corrupt(j, s.recordOffset(j)+int64(pos), "column %q of %d bytes runs past the %d-byte record", s.names[i], size, len(rec))
		}
		dst = append(dst, rec[pos:pos+size:pos+size])
		pos += size
	}
	if pos != len(rec) {
		return dst, s.corrupt(j, s.recordOffset(j)+int64(pos), "record has %d trailing bytes", len(rec)-pos)
	}
	return dst, nil
}

// recordOffset returns sample j's file offset for error messages, -1 if j
// is not a sample of this shard.
func (s *Shard) recordOffset(j int) int64 {
	off, _, err := s.Span(j)
	if err != nil {
		return -1
	}
	return off
}

// Sample decodes sample j into a new format.Sample.
func (s *Shard) Sample(j int) (format.Sample, error) {
	out := make(format.Sample, len(s.cols))
	if err := s.DecodeInto(j, out); err != nil {
		return nil, err
	}
	return out, nil
}

// DecodeInto decodes sample j into out (existing keys for other columns are
// kept). Decoded values never alias the shard.
func (s *Shard) DecodeInto(j int, out format.Sample) error {
	rec, err := s.Record(j)
	if err != nil {
		return err
	}
	var buf [16][]byte
	cols, err := s.Columns(j, rec, buf[:0])
	if err != nil {
		return err
	}
	for i, b := range cols {
		v, err := s.cols[i].Decode(b)
		if err != nil {
			return &format.CorruptError{File: s.file, Shard: s.id, Sample: j, Offset: -1, Reason: fmt.Sprintf("column %q", s.names[i]), Err: err}
		}
		out[s.names[i]] = v
	}
	return nil
}

// Close releases the mapping, if any. Views from Record become invalid.
func (s *Shard) Close() error {
	if s.closer != nil {
		return s.closer.Close()
	}
	return nil
}
