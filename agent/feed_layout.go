package agent

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"github.com/sluicedata/sluice/agentapi"
)

// feedCol is how one schema column goes into a feed batch.
type feedCol struct {
	name     string
	encoding string // the schema's encoding
	fixed    bool   // the record holds the column at a fixed size
	size     int64  // its size when fixed
	// out is the column as the batch holds it (kind, dtype, shape,
	// stride); transform, when set, produces it from the record's value.
	out       agentapi.FeedColumn
	transform ColumnTransform
}

// feedSchema is a schema's plan for feed batches.
type feedSchema struct {
	schema agentapi.Schema
	cols   []feedCol
	nvar   int // variable-size columns in the record (their u32 lengths lead it)
}

// planFeedSchema decides how each column of an MDS schema is laid out:
// scalars and fixed-shape ndarrays collated as fixed columns, everything
// else as variable-size bytes (the client decodes those).
func planFeedSchema(s agentapi.Schema) (*feedSchema, error) {
	if s.Format != "mds" {
		return nil, badRequestf("feed: shards of format %q cannot be fed (mds only); use next", s.Format)
	}
	if len(s.ColumnNames) != len(s.ColumnEncodings) || len(s.ColumnNames) != len(s.ColumnSizes) {
		return nil, fmt.Errorf("%w: feed: schema column lists differ in length", agentapi.ErrCorrupt)
	}
	fs := &feedSchema{schema: s}
	for i, name := range s.ColumnNames {
		enc := s.ColumnEncodings[i]
		c := feedCol{name: name, encoding: enc}
		if sz := s.ColumnSizes[i]; sz != nil {
			c.fixed, c.size = true, *sz
		} else {
			fs.nvar++
		}
		c.out = agentapi.FeedColumn{Name: name, Encoding: enc, Kind: agentapi.FeedVar}
		if c.fixed {
			if dt, shape, ok := fixedLayout(enc); ok {
				es, _ := agentapi.FeedDTypeSize(dt)
				stride := es
				for _, d := range shape {
					stride *= d
				}
				if stride == c.size {
					c.out = agentapi.FeedColumn{Name: name, Encoding: enc, Kind: agentapi.FeedFixed, DType: dt, Shape: shape, Stride: stride}
				}
			}
		}
		fs.cols = append(fs.cols, c)
	}
	return fs, nil
}

// fixedLayout gives the dtype and shape of a value of a fixed-size
// encoding that a batch can hold collated: numpy scalars, "int" (int64)
// and ndarrays with both dtype and shape in the encoding.
func fixedLayout(enc string) (string, []int64, bool) {
	if enc == "int" {
		return "int64", nil, true
	}
	if _, ok := agentapi.FeedDTypeSize(enc); ok {
		return enc, nil, true
	}
	rest, ok := strings.CutPrefix(enc, "ndarray:")
	if !ok {
		return "", nil, false
	}
	dt, dims, ok := strings.Cut(rest, ":")
	if _, known := agentapi.FeedDTypeSize(dt); !ok || !known || dims == "" {
		return "", nil, false
	}
	var shape []int64
	for _, p := range strings.Split(dims, ",") {
		d, err := strconv.ParseInt(p, 10, 64)
		if err != nil || d < 0 || d > 1<<32 {
			return "", nil, false
		}
		shape = append(shape, d)
	}
	return dt, shape, true
}

// spans gives each column's (offset, length) in an MDS record of recLen
// bytes from the record's head (its leading 4 × nvar bytes of lengths).
func (fs *feedSchema) spans(head []byte, recLen int64) ([][2]int64, error) {
	h := 4 * fs.nvar
	if int64(h) > recLen || len(head) < h {
		return nil, fmt.Errorf("%w: record of %d bytes is shorter than its %d column lengths", agentapi.ErrCorrupt, recLen, fs.nvar)
	}
	out := make([][2]int64, len(fs.cols))
	pos, vi := int64(h), 0
	for k, c := range fs.cols {
		n := c.size
		if !c.fixed {
			n = int64(binary.LittleEndian.Uint32(head[4*vi:]))
			vi++
		}
		if n > recLen-pos {
			return nil, fmt.Errorf("%w: column %q runs past the end of its %d-byte record", agentapi.ErrCorrupt, c.name, recLen)
		}
		out[k] = [2]int64{pos, n}
		pos += n
	}
	return out, nil
}

// split cuts an MDS record into its columns' encoded values (aliasing
// rec), appended to dst.
func (fs *feedSchema) split(rec []byte, dst [][]byte) ([][]byte, error) {
	spans, err := fs.spans(rec, int64(len(rec)))
	if err != nil {
		return dst, err
	}
	for _, sp := range spans {
		dst = append(dst, rec[sp[0]:sp[0]+sp[1]:sp[0]+sp[1]])
	}
	return dst, nil
}

func alignUp(n int64) int64 {
	return (n + agentapi.FeedAlign - 1) &^ (agentapi.FeedAlign - 1)
}

// feedPiece is one run of bytes of a batch at its offset in the file.
type feedPiece struct {
	off  int64
	b    []byte
	i, k int // the value's sample and column; i < 0 for metadata
}

// layoutFeed places a batch of n samples: values[i][c] is column c of
// sample i (fixed columns exactly out.Stride bytes). It returns the
// header, the pieces to write (in ascending offset order) and the file
// size. meta receives the small buffers (IDs, offsets) the pieces alias.
func layoutFeed(cols []agentapi.FeedColumn, ids []int64, values [][][]byte, meta []byte) (agentapi.FeedBatch, []feedPiece, []byte, error) {
	n := len(ids)
	b := agentapi.FeedBatch{Op: agentapi.OpFeed, N: n, Columns: make([]agentapi.FeedColumn, len(cols))}
	// The metadata first (IDs, then each variable column's offsets), so
	// the pieces that alias meta do not move when it grows: size it now.
	need := 8 * n
	for _, c := range cols {
		if c.Kind == agentapi.FeedVar {
			need += 8 * (n + 1)
		}
	}
	if cap(meta) < need {
		meta = make([]byte, 0, need)
	}
	meta = meta[:0]
	var pieces []feedPiece
	var pos int64
	b.Samples = pos
	for _, id := range ids {
		meta = binary.LittleEndian.AppendUint64(meta, uint64(id))
	}
	pieces = append(pieces, feedPiece{off: pos, b: meta[:8*n], i: -1})
	pos = alignUp(pos + int64(8*n))
	for k, c := range cols {
		oc := c
		switch c.Kind {
		case agentapi.FeedFixed:
			oc.Offset = pos
			oc.Size = c.Stride * int64(n)
			for i := range values {
				v := values[i][k]
				if int64(len(v)) != c.Stride {
					return b, nil, meta, fmt.Errorf("%w: feed column %q: value of sample %d has %d bytes, want %d", agentapi.ErrCorrupt, c.Name, ids[i], len(v), c.Stride)
				}
				pieces = append(pieces, feedPiece{off: pos + int64(i)*c.Stride, b: v, i: i, k: k})
			}
			pos = alignUp(pos + oc.Size)
		case agentapi.FeedVar:
			start := len(meta)
			oc.Index = pos
			var total uint64
			meta = binary.LittleEndian.AppendUint64(meta, 0)
			for i := range values {
				total += uint64(len(values[i][k]))
				meta = binary.LittleEndian.AppendUint64(meta, total)
			}
			pieces = append(pieces, feedPiece{off: pos, b: meta[start:], i: -1})
			pos = alignUp(pos + int64(8*(n+1)))
			oc.Offset, oc.Size = pos, int64(total)
			for i := range values {
				if v := values[i][k]; len(v) > 0 {
					pieces = append(pieces, feedPiece{off: pos, b: v, i: i, k: k})
					pos += int64(len(v))
				}
			}
			pos = alignUp(pos)
		default:
			return b, nil, meta, fmt.Errorf("feed column %q: kind %q", c.Name, c.Kind)
		}
		if pos > agentapi.MaxFeedBatch {
			return b, nil, meta, fmt.Errorf("%w: feed batch of %d samples exceeds %d bytes", agentapi.ErrInvalid, n, int64(agentapi.MaxFeedBatch))
		}
		b.Columns[k] = oc
	}
	b.Size = pos
	return b, pieces, meta, nil
}
