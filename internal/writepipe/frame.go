// Package writepipe carries samples from the Python writers
// (sluice.MDSWriter, JSONWriter, CSVWriter, TSVWriter, XSVWriter) to the Go
// dataset writers: the Python side packs many samples into one columnar
// frame and writes it to the stdin of `sluice write`; this package decodes
// the frames and feeds every sample to a format writer (format/mds,
// format/jsonl, format/xsv), which encodes, hashes, compresses and stores
// the shards on its own goroutines while the next frame is read.
//
// # Framing
//
// All integers are little-endian. A stream is a sequence of frames, each a
// 16-byte header followed by a body:
//
//	magic   [4]byte  "SLB1" (a batch) or "SLE1" (the end: finish the dataset)
//	count   uint32   samples in the batch (0 for the end frame)
//	bodylen uint64   bytes of body that follow (0 for the end frame)
//
// A batch body holds one section per column, in the column order the
// stream was opened with (sorted names, as MosaicML orders columns). A
// section starts with one kind byte:
//
//	KindFixed   (1)  uint32 width, then count*width bytes: value i is the
//	                 i-th slice of width bytes (already encoded)
//	KindBytes   (2)  count uint32 lengths, then the values back to back
//	                 (already encoded bytes; passed through unchanged)
//	KindString  (3)  as KindBytes; each value is UTF-8 text (a Go string)
//	KindInt64   (4)  count int64 values
//	KindFloat64 (5)  count float64 values (IEEE-754 bits)
//	KindNDArray (6)  as KindBytes; each value is uint8 dtype code (MDS
//	                 ndarray codes), uint8 ndim, ndim uint64 dimensions,
//	                 then the array's little-endian C-order data; dtype
//	                 code 0 is followed by bytes stored unchanged
//	KindBigInt  (7)  as KindBytes; each value is a decimal integer in ASCII
//
// A stream that ends without the end frame (the producer died) is
// abandoned: the shards already written stay, and no index.json is written,
// so a killed producer never leaves an index naming a missing shard.
//
// Every length is checked against the frame before it is used and a frame
// is never larger than the reader's limit, so memory is bounded by that
// limit whatever a frame claims.
package writepipe

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"

	"github.com/sluicedata/sluice/format"
)

// Frame magics.
const (
	MagicBatch = "SLB1"
	MagicEnd   = "SLE1"
)

// HeaderSize is the size of a frame header.
const HeaderSize = 16

// DefaultMaxFrame is the default limit on a frame body (256 MiB).
const DefaultMaxFrame = 256 << 20

// Column section kinds.
const (
	KindFixed   byte = 1
	KindBytes   byte = 2
	KindString  byte = 3
	KindInt64   byte = 4
	KindFloat64 byte = 5
	KindNDArray byte = 6
	KindBigInt  byte = 7
)

// ErrFrame matches every error about a malformed frame.
var ErrFrame = errors.New("writepipe: malformed frame")

// FrameError describes a malformed frame: which frame, which column, what.
type FrameError struct {
	Frame  int64  // frame number, from 0
	Column string // column name, "" for the header
	Reason string
}

// Error returns a message naming the frame and column.
func (e *FrameError) Error() string {
	if e.Column == "" {
		return fmt.Sprintf("writepipe: frame %d: %s", e.Frame, e.Reason)
	}
	return fmt.Sprintf("writepipe: frame %d, column %q: %s", e.Frame, e.Column, e.Reason)
}

// Unwrap returns ErrFrame, so that errors.Is(err, ErrFrame) holds.
func (e *FrameError) Unwrap() error { return ErrFrame }

// ndarray dtype codes of the MDS ndarray encoding.
var dtypeCodes = map[byte]string{
	8: "uint8", 9: "int8", 16: "uint16", 17: "int16", 18: "float16",
	32: "uint32", 33: "int32", 34: "float32", 64: "uint64", 65: "int64", 66: "float64",
}

// section is one column of a parsed batch.
type section struct {
	kind  byte
	width int      // KindFixed
	data  []byte   // the values (fixed, int64, float64) or the blob
	offs  []uint32 // for variable kinds: count+1 offsets into data
}

// Batch is one decoded batch frame: Len samples, column by column. Values
// it returns alias the frame's buffer.
type Batch struct {
	names []string
	n     int
	cols  []section
}

// Len returns the number of samples in the batch.
func (b *Batch) Len() int { return b.n }

// Fill stores sample i's values into s (one entry per column, replacing
// what s held for those names). Byte values are views of the frame.
func (b *Batch) Fill(i int, s format.Sample) error {
	for c := range b.cols {
		v, err := b.value(c, i)
		if err != nil {
			return err
		}
		s[b.names[c]] = v
	}
	return nil
}

// value returns sample i's value of column c as a format.Sample holds it.
func (b *Batch) value(c, i int) (any, error) {
	le := binary.LittleEndian
	sec := &b.cols[c]
	name := b.names[c]
	switch sec.kind {
	case KindFixed:
		return sec.data[i*sec.width : (i+1)*sec.width : (i+1)*sec.width], nil
	case KindInt64:
		return int64(le.Uint64(sec.data[8*i:])), nil
	case KindFloat64:
		return math.Float64frombits(le.Uint64(sec.data[8*i:])), nil
	}
	v := sec.data[sec.offs[i]:sec.offs[i+1]:sec.offs[i+1]]
	switch sec.kind {
	case KindString:
		return string(v), nil
	case KindBigInt:
		n, ok := new(big.Int).SetString(string(v), 10)
		if !ok {
			return nil, fmt.Errorf("column %q: %.40q is not a decimal integer", name, v)
		}
		if n.IsInt64() {
			return n.Int64(), nil
		}
		return n, nil
	case KindNDArray:
		if len(v) > 0 && v[0] == 0 {
			return v[1:], nil // bytes stored unchanged
		}
		a, err := parseNDArray(v)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", name, err)
		}
		return a, nil
	}
	return v, nil // KindBytes
}

func parseNDArray(v []byte) (*format.NDArray, error) {
	a := new(format.NDArray)
	if err := parseNDArrayInto(v, a); err != nil {
		return nil, err
	}
	return a, nil
}

// parseNDArrayInto decodes an ndarray value into a, reusing a.Shape's
// storage; a.Data is a view of v.
func parseNDArrayInto(v []byte, a *format.NDArray) error {
	if len(v) < 2 {
		return errors.New("ndarray value is shorter than its header")
	}
	dt, ok := dtypeCodes[v[0]]
	if !ok {
		return fmt.Errorf("ndarray dtype code %d is unknown", v[0])
	}
	ndim := int(v[1])
	if len(v) < 2+8*ndim {
		return errors.New("ndarray shape runs past the value")
	}
	shape := a.Shape[:0]
	elems := uint64(1)
	for d := range ndim {
		x := binary.LittleEndian.Uint64(v[2+8*d:])
		if x > math.MaxInt32 {
			return fmt.Errorf("ndarray dimension %d is too large", x)
		}
		shape = append(shape, int(x))
		elems *= x
		if elems > uint64(len(v)) {
			break // the size check below fails
		}
	}
	data := v[2+8*ndim:]
	if elems*uint64(format.DTypeSize(dt)) != uint64(len(data)) {
		return fmt.Errorf("ndarray %s%v needs %d data bytes, has %d", dt, shape, elems*uint64(format.DTypeSize(dt)), len(data))
	}
	*a = format.NDArray{DType: dt, Shape: shape, Data: data}
	return nil
}

// Reader reads frames from a stream for a fixed list of columns.
type Reader struct {
	r      io.Reader
	names  []string
	max    int64
	frames int64
	hdr    [HeaderSize]byte
}

// NewReader returns a Reader of frames whose sections follow names.
// maxFrame bounds a frame body; zero or negative means DefaultMaxFrame.
func NewReader(r io.Reader, names []string, maxFrame int64) *Reader {
	if maxFrame <= 0 {
		maxFrame = DefaultMaxFrame
	}
	// Offsets inside a frame are uint32.
	maxFrame = min(maxFrame, math.MaxUint32)
	return &Reader{r: r, names: append([]string(nil), names...), max: maxFrame}
}

// Next reads the next frame's body into buf (grown as needed) and returns
// it with the sample count. end reports the end frame. A stream that ends
// between frames returns io.ErrUnexpectedEOF: a producer that stops
// without the end frame did not finish.
func (r *Reader) Next(buf []byte) (body []byte, count int, end bool, err error) {
	if _, err := io.ReadFull(r.r, r.hdr[:]); err != nil {
		if err == io.EOF {
			return nil, 0, false, io.ErrUnexpectedEOF
		}
		return nil, 0, false, err
	}
	k := r.frames
	r.frames++
	le := binary.LittleEndian
	magic := string(r.hdr[:4])
	n := le.Uint32(r.hdr[4:])
	size := le.Uint64(r.hdr[8:])
	switch magic {
	case MagicEnd:
		if n != 0 || size != 0 {
			return nil, 0, false, &FrameError{Frame: k, Reason: "end frame with a body"}
		}
		return nil, 0, true, nil
	case MagicBatch:
	default:
		return nil, 0, false, &FrameError{Frame: k, Reason: fmt.Sprintf("bad magic %q", magic)}
	}
	if size > uint64(r.max) {
		return nil, 0, false, &FrameError{Frame: k, Reason: fmt.Sprintf("body of %d bytes exceeds the limit of %d", size, r.max)}
	}
	if uint64(n) > size {
		return nil, 0, false, &FrameError{Frame: k, Reason: fmt.Sprintf("%d samples in %d bytes", n, size)}
	}
	if uint64(cap(buf)) < size {
		buf = make([]byte, size)
	}
	buf = buf[:size]
	if _, err := io.ReadFull(r.r, buf); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, 0, false, fmt.Errorf("writepipe: frame %d body: %w", k, err)
	}
	return buf, int(n), false, nil
}

// Parse decodes a batch body of count samples (from Next) into b, reusing
// b's storage. frame numbers the frame in errors.
func Parse(names []string, body []byte, count int, frame int64, b *Batch) error {
	b.names, b.n = names, count
	if cap(b.cols) < len(names) {
		b.cols = make([]section, len(names))
	}
	b.cols = b.cols[:len(names)]
	le := binary.LittleEndian
	pos := 0
	bad := func(c int, f string, args ...any) error {
		return &FrameError{Frame: frame, Column: names[c], Reason: fmt.Sprintf(f, args...)}
	}
	take := func(n int) ([]byte, bool) {
		if n < 0 || n > len(body)-pos {
			return nil, false
		}
		v := body[pos : pos+n]
		pos += n
		return v, true
	}
	for c := range names {
		sec := &b.cols[c]
		k, ok := take(1)
		if !ok {
			return bad(c, "section missing")
		}
		sec.kind = k[0]
		switch sec.kind {
		case KindFixed:
			w, ok := take(4)
			if !ok {
				return bad(c, "fixed width missing")
			}
			width := le.Uint32(w)
			if width == 0 || uint64(width)*uint64(count) > uint64(len(body)-pos) {
				return bad(c, "%d values of %d bytes do not fit", count, width)
			}
			sec.width = int(width)
			sec.data, _ = take(sec.width * count)
		case KindInt64, KindFloat64:
			if sec.data, ok = take(8 * count); !ok {
				return bad(c, "%d values of 8 bytes do not fit", count)
			}
		case KindBytes, KindString, KindNDArray, KindBigInt:
			lens, ok := take(4 * count)
			if !ok {
				return bad(c, "%d lengths do not fit", count)
			}
			if cap(sec.offs) < count+1 {
				sec.offs = make([]uint32, count+1)
			}
			sec.offs = sec.offs[:count+1]
			var total uint64
			for i := range count {
				sec.offs[i] = uint32(total)
				total += uint64(le.Uint32(lens[4*i:]))
				if total > uint64(len(body)-pos) {
					return bad(c, "values run past the frame")
				}
			}
			sec.offs[count] = uint32(total)
			sec.data, _ = take(int(total))
		default:
			return bad(c, "unknown kind %d", sec.kind)
		}
	}
	if pos != len(body) {
		return &FrameError{Frame: frame, Reason: fmt.Sprintf("%d bytes after the last column", len(body)-pos)}
	}
	return nil
}

// AppendHeader appends a frame header to dst (for producers and tests).
func AppendHeader(dst []byte, magic string, count uint32, bodyLen uint64) []byte {
	dst = append(dst, magic...)
	dst = binary.LittleEndian.AppendUint32(dst, count)
	return binary.LittleEndian.AppendUint64(dst, bodyLen)
}
