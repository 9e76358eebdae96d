package writepipe

import (
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
	// WriteFields appends one sample given as each column's encoded
	// value, in Columns order.
	WriteFields(fields [][]byte) error
}

// recordEncoder hands a batch's samples to a RecordSink column by column.
type recordEncoder struct {
	sink RecordSink
	encs []*mds.Encoding
	raw  []bool           // per column of the current batch: values are already encoded
	nd   []format.NDArray // per column: the ndarray being encoded (storage reused)
	rec  []byte           // scratch for values encoded here
	ends [][2]int         // per column: the value's bounds in rec
	// fields holds the sample's values for the sink.
	fields [][]byte
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
	e := &recordEncoder{sink: rs, encs: encs, raw: make([]bool, len(names)), nd: make([]format.NDArray, len(names)),
		ends: make([][2]int, len(names)), fields: make([][]byte, len(names))}
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

// write hands sample i of b to the sink as its columns' encoded values:
// views of the frame where the value is already encoded, else encoded
// into the encoder's scratch buffer.
func (e *recordEncoder) write(b *Batch, i int) error {
	rec := e.rec[:0]
	for c := range b.cols {
		sec := &b.cols[c]
		if e.raw[c] {
			if sec.kind == KindFixed {
				e.fields[c] = sec.data[i*sec.width : (i+1)*sec.width]
			} else {
				e.fields[c] = sec.data[sec.offs[i]:sec.offs[i+1]]
			}
			if size := e.encs[c].Size(); size > 0 && len(e.fields[c]) != size {
				e.rec = rec
				return fmt.Errorf("mds: column %q: %s value encodes to %d bytes, want %d", b.names[c], e.encs[c], len(e.fields[c]), size)
			}
			continue
		}
		val, err := e.value(b, c, i)
		if err != nil {
			e.rec = rec
			return err
		}
		before := len(rec)
		if rec, err = e.encs[c].Append(rec, val); err != nil {
			e.rec = rec
			return fmt.Errorf("mds: column %q: %w", b.names[c], err)
		}
		e.ends[c] = [2]int{before, len(rec)}
		e.fields[c] = nil
	}
	e.rec = rec
	// Encoded values point into rec only now that it no longer grows.
	for c := range b.cols {
		if !e.raw[c] {
			e.fields[c] = rec[e.ends[c][0]:e.ends[c][1]]
		}
	}
	return e.sink.WriteFields(e.fields)
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
