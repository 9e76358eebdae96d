package mds

import (
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"math"
	"math/big"
	"strconv"

	"github.com/sluicedata/sluice/format"
)

// Append appends the encoding of v to dst. Accepted values, besides the
// decoded types listed in format.Sample (which round-trip):
//
//   - []byte for any encoding: written unchanged (MosaicML's pass-through
//     rule), subject to the fixed-size check;
//   - any Go integer (or *big.Int) for int, uintN, intN, str_int and the
//     float encodings, checked against the target range (MosaicML
//     would wrap silently);
//   - float32/float64 for float16/32/64 and str_float; string for
//     str_decimal (validated);
//   - for json any value format.AppendJSON accepts; format.JSON is taken as
//     text after validation;
//   - image.Image for jpeg, png and pil (JPEG quality 75, as Pillow's
//     default); [][]byte of JPEG files for jpeg_array.
//
// pkl accepts only format.Pickle or []byte: Sluice does not pickle.
func (e *Encoding) Append(dst []byte, v any) ([]byte, error) {
	start := len(dst)
	out, err := e.appendValue(dst, v)
	if err != nil {
		return dst[:start], err
	}
	if e.size > 0 && len(out)-start != e.size {
		return dst[:start], fmt.Errorf("%s value encodes to %d bytes, want %d", e.text, len(out)-start, e.size)
	}
	return out, nil
}

func (e *Encoding) appendValue(dst []byte, v any) ([]byte, error) {
	if b, ok := v.([]byte); ok {
		return append(dst, b...), nil
	}
	le := binary.LittleEndian
	switch e.kind {
	case kBytes:
		break
	case kStr:
		if s, ok := v.(string); ok {
			return append(dst, s...), nil
		}
	case kInt, kI64, kI32, kI16, kI8, kU8, kU16, kU32, kU64:
		n, wide, ok := intOf(v)
		if !ok {
			break
		}
		if err := e.checkRange(n, wide); err != nil {
			return nil, err
		}
		switch e.kind {
		case kU8, kI8:
			return append(dst, byte(n)), nil
		case kU16, kI16:
			return le.AppendUint16(dst, uint16(n)), nil
		case kU32, kI32:
			return le.AppendUint32(dst, uint32(n)), nil
		case kU64:
			if wide != nil {
				return le.AppendUint64(dst, wide.Uint64()), nil
			}
		}
		return le.AppendUint64(dst, uint64(n)), nil
	case kF16, kF32, kF64:
		var f float64
		switch x := v.(type) {
		case format.Float16:
			if e.kind == kF16 {
				return le.AppendUint16(dst, uint16(x)), nil
			}
			f = x.Float64()
		case float32:
			if e.kind == kF32 {
				// Keep the exact bits (a float64 round trip would quiet a
				// signalling NaN).
				return le.AppendUint32(dst, math.Float32bits(x)), nil
			}
			f = float64(x)
		case float64:
			f = x
		default:
			n, wide, ok := intOf(v)
			if !ok {
				return nil, fmt.Errorf("cannot encode %T as %s", v, e.text)
			}
			if wide != nil {
				f, _ = new(big.Float).SetInt(wide).Float64()
			} else {
				f = float64(n)
			}
		}
		switch e.kind {
		case kF16:
			return le.AppendUint16(dst, uint16(format.Float16From(f))), nil
		case kF32:
			return le.AppendUint32(dst, math.Float32bits(float32(f))), nil
		}
		return le.AppendUint64(dst, math.Float64bits(f)), nil
	case kStrInt:
		n, wide, ok := intOf(v)
		if !ok {
			break
		}
		if wide != nil {
			return wide.Append(dst, 10), nil
		}
		return strconv.AppendInt(dst, n, 10), nil
	case kStrFloat:
		switch x := v.(type) {
		case float64:
			return format.AppendPyFloat(dst, x, 64), nil
		case float32:
			return format.AppendPyFloat(dst, float64(x), 64), nil
		}
		if n, wide, ok := intOf(v); ok { // Python str(int)
			if wide != nil {
				return wide.Append(dst, 10), nil
			}
			return strconv.AppendInt(dst, n, 10), nil
		}
	case kStrDecimal:
		var s string
		switch x := v.(type) {
		case format.Decimal:
			s = string(x)
		case string:
			s = x
		default:
			return nil, fmt.Errorf("cannot encode %T as %s", v, e.text)
		}
		if !validDecimal(s) {
			return nil, fmt.Errorf("%.40q is not a decimal", s)
		}
		return append(dst, s...), nil
	case kJSON:
		if j, ok := v.(format.JSON); ok {
			if _, err := format.ParseJSON(j); err != nil {
				return nil, err
			}
			return append(dst, j...), nil
		}
		return format.AppendJSON(dst, v, false)
	case kPkl:
		if p, ok := v.(format.Pickle); ok {
			return append(dst, p...), nil
		}
		return nil, fmt.Errorf("pkl columns take format.Pickle or []byte, not %T", v)
	case kNDArray:
		switch a := v.(type) {
		case *format.NDArray:
			return e.appendNDArray(dst, a)
		case format.NDArray:
			return e.appendNDArray(dst, &a)
		}
	case kPIL, kJPEG, kPNG:
		return encodeImage(dst, e.kind, v)
	case kJPEGArray:
		var items [][]byte
		switch x := v.(type) {
		case [][]byte:
			items = x
		case []*format.Image:
			for _, im := range x {
				if im == nil || im.Format != "JPEG" || im.Encoded == nil {
					return nil, errors.New("jpeg_array takes encoded JPEG images")
				}
				items = append(items, im.Encoded)
			}
		default:
			return nil, fmt.Errorf("cannot encode %T as %s", v, e.text)
		}
		dst = le.AppendUint32(dst, uint32(len(items)))
		for _, it := range items {
			dst = le.AppendUint32(dst, uint32(len(it)))
		}
		for _, it := range items {
			dst = append(dst, it...)
		}
		return dst, nil
	case kListPIL, kListJPEG, kListPNG:
		var items []any
		switch x := v.(type) {
		case []*format.Image:
			for _, im := range x {
				items = append(items, im)
			}
		case []image.Image:
			for _, im := range x {
				items = append(items, im)
			}
		default:
			return nil, fmt.Errorf("cannot encode %T as %s", v, e.text)
		}
		k := map[kind]kind{kListPIL: kPIL, kListJPEG: kJPEG, kListPNG: kPNG}[e.kind]
		dst = le.AppendUint32(dst, 0)
		dst = le.AppendUint32(dst, uint32(len(items)))
		sizeAt := len(dst)
		for range items {
			dst = le.AppendUint32(dst, 0)
		}
		for i, it := range items {
			before := len(dst)
			var err error
			if dst, err = encodeImage(dst, k, it); err != nil {
				return nil, fmt.Errorf("item %d: %w", i, err)
			}
			le.PutUint32(dst[sizeAt+4*i:], uint32(len(dst)-before))
		}
		return dst, nil
	}
	return nil, fmt.Errorf("cannot encode %T as %s", v, e.text)
}

// intOf returns v as an integer: n when it fits in int64, otherwise wide.
func intOf(v any) (n int64, wide *big.Int, ok bool) {
	switch x := v.(type) {
	case int:
		return int64(x), nil, true
	case int8:
		return int64(x), nil, true
	case int16:
		return int64(x), nil, true
	case int32:
		return int64(x), nil, true
	case int64:
		return x, nil, true
	case uint:
		return intOf(uint64(x))
	case uint8:
		return int64(x), nil, true
	case uint16:
		return int64(x), nil, true
	case uint32:
		return int64(x), nil, true
	case uint64:
		if x > math.MaxInt64 {
			return 0, new(big.Int).SetUint64(x), true
		}
		return int64(x), nil, true
	case *big.Int:
		if x == nil {
			return 0, nil, false
		}
		if x.IsInt64() {
			return x.Int64(), nil, true
		}
		return 0, x, true
	}
	return 0, nil, false
}

func (e *Encoding) checkRange(n int64, wide *big.Int) error {
	var lo, hi int64
	switch e.kind {
	case kU8:
		lo, hi = 0, math.MaxUint8
	case kU16:
		lo, hi = 0, math.MaxUint16
	case kU32:
		lo, hi = 0, math.MaxUint32
	case kI8:
		lo, hi = math.MinInt8, math.MaxInt8
	case kI16:
		lo, hi = math.MinInt16, math.MaxInt16
	case kI32:
		lo, hi = math.MinInt32, math.MaxInt32
	case kU64:
		if wide != nil {
			if !wide.IsUint64() {
				return fmt.Errorf("%s out of range for %s", wide, e.text)
			}
			return nil
		}
		lo, hi = 0, math.MaxInt64
	default: // int, int64
		lo, hi = math.MinInt64, math.MaxInt64
	}
	if wide != nil || n < lo || n > hi {
		if wide != nil {
			return fmt.Errorf("%s out of range for %s", wide, e.text)
		}
		return fmt.Errorf("%d out of range for %s", n, e.text)
	}
	return nil
}
