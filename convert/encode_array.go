package convert

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/sluicedata/sluice/convert/input"
	"github.com/sluicedata/sluice/format"
)

// appendArray encodes an NDArray value (a list of numbers) as a
// one-dimensional ndarray, or for json columns as a JSON array.
func (c *column) appendArray(dst []byte, v *input.Value) ([]byte, error) {
	dt := v.DType()
	size := format.DTypeSize(dt)
	if size == 0 || len(v.Bytes)%size != 0 {
		return dst, fmt.Errorf("malformed %s array of %d bytes", dt, len(v.Bytes))
	}
	n := len(v.Bytes) / size
	enc := c.enc.String()
	switch {
	case strings.HasPrefix(enc, "ndarray"):
		if n == 0 {
			return dst, errors.New("empty list: an ndarray needs at least one element")
		}
		return c.enc.Append(dst, &format.NDArray{DType: dt, Shape: []int{n}, Data: v.Bytes})
	case enc == "json":
		dst = append(dst, '[')
		le := binary.LittleEndian
		for i := range n {
			if i > 0 {
				dst = append(dst, ',')
			}
			b := v.Bytes[i*size:]
			var x any
			switch dt {
			case "uint8":
				x = int64(b[0])
			case "int8":
				x = int64(int8(b[0]))
			case "int32":
				x = int64(int32(le.Uint32(b)))
			case "uint32":
				x = int64(le.Uint32(b))
			case "int64":
				x = int64(le.Uint64(b))
			case "float32":
				x = float64(math.Float32frombits(le.Uint32(b)))
			case "float64":
				x = math.Float64frombits(le.Uint64(b))
			default:
				return dst, fmt.Errorf("cannot write a %s array as json", dt)
			}
			var err error
			if dst, err = format.AppendJSON(dst, x, false); err != nil {
				return dst, err
			}
		}
		return append(dst, ']'), nil
	}
	return dst, fmt.Errorf("cannot encode a list of %s as %s (use ndarray:%s or json)", dt, enc, dt)
}

// appendDefault writes the zero value of the column's encoding, for a null
// under --nulls default. Encodings without a natural zero (ndarray,
// images, pkl) fail.
func (c *column) appendDefault(dst []byte) ([]byte, error) {
	enc := c.enc.String()
	switch {
	case enc == "bytes" || enc == "str":
		return dst, nil
	case isIntEncoding(enc) || enc == "str_int":
		return c.enc.Append(dst, int64(0))
	case strings.HasPrefix(enc, "float") || enc == "str_float":
		return c.enc.Append(dst, 0.0)
	}
	return dst, fmt.Errorf("%w, and a %s column has no default value (use --nulls skip-row)", errNull, enc)
}
