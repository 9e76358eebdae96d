package writepipe

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/mds"
)

// RecordSink is a Sink that also takes samples already encoded as MDS
// sample records (format/mds Writer satisfies it). Run feeds such a sink
// records built straight from a frame's columns, with no format.Sample in
// between; the bytes written are the same.
type RecordSink interface {
	Sink
	// Columns returns the column names in record order and their
	// encodings.
	Columns() ([]string, []*mds.Encoding)
	// WriteRecord appends one encoded sample record.
	WriteRecord(rec []byte) error
}

// recordEncoder builds MDS sample records from a batch's columns.
type recordEncoder struct {
	sink RecordSink
	encs []*mds.Encoding
	nvar int
	raw  []bool           // per column of the current batch: values are already encoded
	nd   []format.NDArray // per column: the ndarray being encoded (storage reused)
	rec  []byte
}

// newRecordEncoder returns an encoder for sink, or nil when sink takes no
// records or its columns are not names (in that order).
func newRecordEncoder(sink Sink, names []string) *recordEncoder {
	rs, ok := sink.(RecordSink)
	if !ok {
		return nil
	}
	cols, encs := rs.Columns()
	if !slices.Equal(cols, names) || len(encs) != len(names) {
		return nil
	}
	e := &recordEncoder{sink: rs, encs: encs, raw: make([]bool, len(names)), nd: make([]format.NDArray, len(names))}
	for _, enc := range encs {
		if enc.Size() == 0 {
			e.nvar++
		}
	}
	return e
}

// prepare decides, for each column of b, whether its values are copied as
// they are. Bytes are the encoded value in every MDS encoding (as
// mds.Encoding.Append takes []byte); text is for the str encoding.
func (e *recordEncoder) prepare(b *Batch) {
	for c := range b.cols {
		switch b.cols[c].kind {
		case KindFixed, KindBytes:
			e.raw[c] = true
		case KindString:
			e.raw[c] = e.encs[c].String() == "str"
		default:
			e.raw[c] = false
		}
	}
}

// write encodes sample i of b as a record and hands it to the sink.
func (e *recordEncoder) write(b *Batch, i int) error {
	rec := e.rec[:0]
	for range e.nvar {
		rec = append(rec, 0, 0, 0, 0)
	}
	v := 0
	for c := range b.cols {
		enc := e.encs[c]
		before := len(rec)
		if e.raw[c] {
			sec := &b.cols[c]
			if sec.kind == KindFixed {
				rec = append(rec, sec.data[i*sec.width:(i+1)*sec.width]...)
			} else {
				rec = append(rec, sec.data[sec.offs[i]:sec.offs[i+1]]...)
			}
			if size := enc.Size(); size > 0 && len(rec)-before != size {
				e.rec = rec
				return fmt.Errorf("mds: column %q: %s value encodes to %d bytes, want %d", b.names[c], enc, len(rec)-before, size)
			}
		} else {
			val, err := e.value(b, c, i)
			if err != nil {
				e.rec = rec
				return err
			}
			if rec, err = enc.Append(rec, val); err != nil {
				e.rec = rec
				return fmt.Errorf("mds: column %q: %w", b.names[c], err)
			}
		}
		if enc.Size() == 0 {
			binary.LittleEndian.PutUint32(rec[4*v:], uint32(len(rec)-before))
			v++
		}
	}
	e.rec = rec
	return e.sink.WriteRecord(rec)
}

// value returns sample i's value of column c for mds.Encoding.Append; an
// ndarray is decoded into storage the encoder reuses.
func (e *recordEncoder) value(b *Batch, c, i int) (any, error) {
	sec := &b.cols[c]
	if sec.kind != KindNDArray {
		return b.value(c, i)
	}
	v := sec.data[sec.offs[i]:sec.offs[i+1]:sec.offs[i+1]]
	if len(v) > 0 && v[0] == 0 {
		return v[1:], nil // bytes stored unchanged
	}
	if err := parseNDArrayInto(v, &e.nd[c]); err != nil {
		return nil, fmt.Errorf("column %q: %w", b.names[c], err)
	}
	return &e.nd[c], nil
}
