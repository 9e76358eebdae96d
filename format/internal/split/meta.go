// Package split holds what MosaicML's two "split" shard formats share:
// JSON lines (format/jsonl) and CSV/TSV/XSV (format/xsv). A split shard is
// a data file plus a meta file
//
//	u32 N | u32 offsets[N+1] | config JSON (Python sort_keys text)
//
// whose offsets are byte positions inside the data file (spec section 7).
// This package parses and validates meta files (ParseMeta, Shard), builds
// them (AppendMeta), parses the embedded config (ParseConfig) and runs the
// shard-writing pipeline both writers share (Writer): exact size
// accounting, flushing, hashing, compression, atomic files and the
// index.json.
package split

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/sluicedata/sluice/format"
)

// MaxDataBytes is the largest data file: offsets are u32 positions in it.
const MaxDataBytes = 1<<32 - 1

// Meta is a validated meta file: the sample count, the offset table (a
// view of the meta bytes) and the embedded config text.
type Meta struct {
	// N is the number of samples.
	N int
	// Offs holds the 4·(N+1) bytes of little-endian u32 offsets.
	Offs []byte
	// Config is the writer configuration JSON that follows the offsets.
	Config []byte
}

// ParseMeta validates meta (the meta file's bytes, named metaFile in
// errors) against a data file of dataSize bytes: the count fits the file,
// offsets never decrease, and the last one is the data file's size. The
// result holds views of meta. Errors are *format.CorruptError.
func ParseMeta(metaFile string, meta []byte, dataSize int64) (Meta, error) {
	bad := func(off int64, f string, args ...any) error {
		ce := format.Corruptf(metaFile, f, args...)
		ce.Offset = off
		return ce
	}
	if len(meta) < 8 {
		return Meta{}, bad(0, "meta file of %d bytes is shorter than the smallest one (8)", len(meta))
	}
	n := int64(binary.LittleEndian.Uint32(meta))
	if n > format.MaxShardSamples {
		return Meta{}, bad(0, "sample count %d exceeds the limit of %d", n, format.MaxShardSamples)
	}
	if 8+4*n > int64(len(meta)) {
		return Meta{}, bad(0, "sample count %d does not fit in a %d-byte meta file", n, len(meta))
	}
	offs := meta[4 : 8+4*n]
	le := binary.LittleEndian
	prev := int64(le.Uint32(offs))
	if prev > dataSize {
		return Meta{}, bad(4, "first offset %d is past the end of the %d-byte data file", prev, dataSize)
	}
	for i := int64(1); i <= n; i++ {
		o := int64(le.Uint32(offs[4*i:]))
		if o < prev {
			return Meta{}, bad(4+4*i, "offset %d of sample %d is before the previous offset %d", o, i, prev)
		}
		prev = o
	}
	if prev != dataSize {
		return Meta{}, bad(4+4*n, "last offset %d is not the data file's size %d", prev, dataSize)
	}
	return Meta{N: int(n), Offs: offs, Config: meta[8+4*n:]}, nil
}

// Span returns sample j's byte range in the data file; j must be in
// [0, N).
func (m *Meta) Span(j int) (off, n int64) {
	le := binary.LittleEndian
	begin := int64(le.Uint32(m.Offs[4*j:]))
	end := int64(le.Uint32(m.Offs[4*j+4:]))
	return begin, end - begin
}

// AppendMeta appends a meta file for records that end at ends (positions
// in the data file, ascending), where the first record starts at first:
// the count, first followed by ends as u32, then cfg. Every position must
// be below 2^32; the writer guarantees it.
func AppendMeta(dst []byte, first int64, ends []int64, cfg []byte) []byte {
	le := binary.LittleEndian
	dst = le.AppendUint32(dst, uint32(len(ends)))
	dst = le.AppendUint32(dst, uint32(first))
	for _, e := range ends {
		dst = le.AppendUint32(dst, uint32(e))
	}
	return append(dst, cfg...)
}

// ParseConfig parses the writer configuration a meta file carries into a
// ShardInfo (with empty file descriptions and no sample count), through the index parser so
// the same checks apply. It is used when a shard is opened without its
// index entry.
func ParseConfig(b []byte) (*format.ShardInfo, error) {
	v, err := format.ParseJSON(b)
	if err != nil {
		return nil, err
	}
	obj, ok := v.(*format.JSONObject)
	if !ok {
		return nil, errors.New("config is not an object")
	}
	// Turn the config into a one-shard index entry with placeholder files.
	file := func(name string) *format.JSONObject {
		return &format.JSONObject{Keys: []string{"basename", "bytes"},
			Values: map[string]any{"basename": name, "bytes": format.JSONNumber("0")}}
	}
	add := func(k string, v any) {
		if _, dup := obj.Values[k]; !dup {
			obj.Keys = append(obj.Keys, k)
		}
		obj.Values[k] = v
	}
	add("raw_data", file("data"))
	add("raw_meta", file("meta"))
	add("samples", format.JSONNumber("0"))
	add("zip_data", nil)
	add("zip_meta", nil)
	if c, ok := obj.Values["compression"].(string); ok && c != "" {
		add("zip_data", file("data.zip"))
		add("zip_meta", file("meta.zip"))
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
	s := &idx.Shards[0]
	s.RawData, s.RawMeta, s.ZipData, s.ZipMeta = format.FileInfo{}, &format.FileInfo{}, nil, nil
	return s, nil
}

// CheckInfo verifies that an index entry describes a split shard of one of
// the given formats, with a meta file.
func CheckInfo(info *format.ShardInfo, formats ...string) error {
	for _, f := range formats {
		if info.Format == f {
			if info.RawMeta == nil {
				return fmt.Errorf("%s shard has no raw_meta", f)
			}
			return nil
		}
	}
	return fmt.Errorf("format is %q, not %v", info.Format, formats)
}
