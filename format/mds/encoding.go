package mds

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sluicedata/sluice/format"
)

type kind uint8

const (
	kBytes kind = iota + 1
	kStr
	kInt
	kU8
	kU16
	kU32
	kU64
	kI8
	kI16
	kI32
	kI64
	kF16
	kF32
	kF64
	kStrInt
	kStrFloat
	kStrDecimal
	kJSON
	kPkl
	kPIL
	kJPEG
	kPNG
	kJPEGArray
	kListPIL
	kListJPEG
	kListPNG
	kNDArray
)

var kinds = map[string]kind{
	"bytes": kBytes, "str": kStr, "int": kInt,
	"uint8": kU8, "uint16": kU16, "uint32": kU32, "uint64": kU64,
	"int8": kI8, "int16": kI16, "int32": kI32, "int64": kI64,
	"float16": kF16, "float32": kF32, "float64": kF64,
	"str_int": kStrInt, "str_float": kStrFloat, "str_decimal": kStrDecimal,
	"json": kJSON, "pkl": kPkl, "pil": kPIL, "jpeg": kJPEG, "png": kPNG,
	"jpeg_array": kJPEGArray, "jpegarray": kJPEGArray,
	"list[pil]": kListPIL, "list[jpeg]": kListJPEG, "list[png]": kListPNG,
	"ndarray": kNDArray,
}

var scalarSize = map[kind]int{
	kInt: 8, kU8: 1, kU16: 2, kU32: 4, kU64: 8, kI8: 1, kI16: 2, kI32: 4, kI64: 8,
	kF16: 2, kF32: 4, kF64: 8,
}

// maxStaticElems bounds the element count of a static ndarray shape, so a
// hostile encoding string cannot declare an absurd fixed size.
const maxStaticElems = 1 << 32

// Encoding is a parsed MDS column encoding such as "int", "str" or
// "ndarray:int16:2,3". It is immutable and safe for concurrent use.
type Encoding struct {
	text  string
	kind  kind
	size  int
	dtype string // ndarray: static dtype, "" if dynamic
	shape []int  // ndarray: static shape, nil if dynamic
}

// ParseEncoding parses an MDS encoding string (spec section 4.1). Only
// ndarray takes parameters.
func ParseEncoding(s string) (*Encoding, error) {
	name, params, hasParams := strings.Cut(s, ":")
	k, ok := kinds[name]
	if !ok {
		return nil, fmt.Errorf("mds: unknown encoding %q", s)
	}
	e := &Encoding{text: s, kind: k, size: scalarSize[k]}
	if k != kNDArray {
		if hasParams {
			return nil, fmt.Errorf("mds: encoding %q takes no parameters", s)
		}
		return e, nil
	}
	if params == "" {
		return e, nil
	}
	dt, shape, hasShape := strings.Cut(params, ":")
	if format.DTypeSize(dt) == 0 {
		return nil, fmt.Errorf("mds: encoding %q: unsupported dtype %q", s, dt)
	}
	e.dtype = dt
	if !hasShape {
		return e, nil
	}
	elems := 1
	for _, d := range strings.Split(shape, ",") {
		n, err := strconv.Atoi(d)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("mds: encoding %q: bad dimension %q", s, d)
		}
		if elems > maxStaticElems/n {
			return nil, fmt.Errorf("mds: encoding %q: shape too large", s)
		}
		elems *= n
		e.shape = append(e.shape, n)
	}
	if len(e.shape) > 63 {
		return nil, fmt.Errorf("mds: encoding %q: more than 63 dimensions", s)
	}
	e.size = elems * format.DTypeSize(dt)
	return e, nil
}

// String returns the encoding string.
func (e *Encoding) String() string { return e.text }

// Size returns the fixed encoded size in bytes, or 0 for variable-size
// encodings (written as null in column_sizes).
func (e *Encoding) Size() int { return e.size }

// Unsafe reports whether the encoding is pkl, whose values are Python
// pickles (MosaicML refuses them unless allow_unsafe_types is set).
func (e *Encoding) Unsafe() bool { return e.kind == kPkl }

// IsImage reports whether values decode to images.
func (e *Encoding) IsImage() bool {
	switch e.kind {
	case kPIL, kJPEG, kPNG, kJPEGArray, kListPIL, kListJPEG, kListPNG:
		return true
	}
	return false
}

// Decode decodes one column value from its encoded bytes, returning the
// type listed in format.Sample's documentation. The result never aliases
// b. Errors describe what is wrong; the caller adds the location.
func (e *Encoding) Decode(b []byte) (any, error) {
	if e.size > 0 && len(b) != e.size {
		return nil, fmt.Errorf("%s value has %d bytes, want %d", e.text, len(b), e.size)
	}
	le := binary.LittleEndian
	switch e.kind {
	case kBytes:
		return append([]byte{}, b...), nil
	case kStr:
		if !utf8.Valid(b) {
			return nil, errors.New("str value is not valid UTF-8")
		}
		return string(b), nil
	case kInt, kI64:
		return int64(le.Uint64(b)), nil
	case kU8:
		return b[0], nil
	case kU16:
		return le.Uint16(b), nil
	case kU32:
		return le.Uint32(b), nil
	case kU64:
		return le.Uint64(b), nil
	case kI8:
		return int8(b[0]), nil
	case kI16:
		return int16(le.Uint16(b)), nil
	case kI32:
		return int32(le.Uint32(b)), nil
	case kF16:
		return format.Float16(le.Uint16(b)), nil
	case kF32:
		return math.Float32frombits(le.Uint32(b)), nil
	case kF64:
		return math.Float64frombits(le.Uint64(b)), nil
	case kStrInt:
		return parsePyInt(b)
	case kStrFloat:
		return parsePyFloat(b)
	case kStrDecimal:
		if !validDecimal(string(b)) {
			return nil, fmt.Errorf("str_decimal value %.40q is not a decimal", b)
		}
		return format.Decimal(b), nil
	case kJSON:
		if !utf8.Valid(b) {
			return nil, errors.New("json value is not valid UTF-8")
		}
		if _, err := format.ParseJSON(b); err != nil {
			return nil, err
		}
		return format.JSON(append([]byte{}, b...)), nil
	case kPkl:
		return format.Pickle(append([]byte{}, b...)), nil
	case kNDArray:
		return e.decodeNDArray(b)
	case kPIL:
		return decodePIL(b)
	case kJPEG:
		return decodeEncodedImage(b, "JPEG")
	case kPNG:
		return decodeEncodedImage(b, "PNG")
	case kJPEGArray:
		return decodeJPEGArray(b)
	case kListPIL, kListJPEG, kListPNG:
		return e.decodeImageList(b)
	}
	return nil, fmt.Errorf("encoding %q cannot be decoded", e.text)
}

// parsePyInt parses str_int text as Python's int() does for what
// MosaicML writes: optional surrounding whitespace, a sign, decimal digits
// (underscores between digits allowed).
func parsePyInt(b []byte) (*big.Int, error) {
	s := strings.TrimSpace(string(b))
	if len(s) > 5000 { // CPython's default int max str digits (4300) + slack
		return nil, errors.New("str_int value too long")
	}
	clean := strings.ReplaceAll(s, "_", "")
	if clean != s && (strings.Contains(s, "__") || strings.HasSuffix(s, "_") || strings.HasPrefix(strings.TrimLeft(s, "+-"), "_")) {
		return nil, fmt.Errorf("str_int value %.40q is not an integer", b)
	}
	n, ok := new(big.Int).SetString(clean, 10)
	if !ok || clean == "" || strings.ContainsAny(clean[1:], "+-") {
		return nil, fmt.Errorf("str_int value %.40q is not an integer", b)
	}
	return n, nil
}

// parsePyFloat parses str_float text as Python's float() does.
func parsePyFloat(b []byte) (float64, error) {
	s := strings.TrimSpace(string(b))
	if len(s) > 1000 {
		return 0, errors.New("str_float value too long")
	}
	lower := strings.ToLower(strings.TrimLeft(s, "+-"))
	switch lower {
	case "nan", "inf", "infinity":
		neg := strings.HasPrefix(s, "-")
		if lower == "nan" {
			// CPython's float('nan') is the quiet NaN 0x7ff8000000000000
			// (Go's math.NaN has a different payload).
			if neg {
				return math.Float64frombits(0xfff8000000000000), nil
			}
			return math.Float64frombits(0x7ff8000000000000), nil
		}
		if neg {
			return math.Inf(-1), nil
		}
		return math.Inf(1), nil
	}
	if strings.ContainsAny(lower, "xp") || strings.HasPrefix(lower, "_") {
		return 0, fmt.Errorf("str_float value %.40q is not a float", b)
	}
	f, err := strconv.ParseFloat(strings.ReplaceAll(s, "_", ""), 64)
	if err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) && ne.Err == strconv.ErrRange {
			return f, nil // Python rounds to ±inf or 0 as well
		}
		return 0, fmt.Errorf("str_float value %.40q is not a float", b)
	}
	return f, nil
}

// validDecimal checks Python decimal.Decimal string syntax.
func validDecimal(s string) bool {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > 5000 {
		return false
	}
	if s[0] == '+' || s[0] == '-' {
		s = s[1:]
	}
	switch strings.ToLower(s) {
	case "inf", "infinity", "nan", "snan":
		return true
	}
	if l := strings.ToLower(s); strings.HasPrefix(l, "nan") || strings.HasPrefix(l, "snan") {
		return allDigits(strings.TrimLeft(l, "sna"))
	}
	mant, exp, hasExp := strings.Cut(strings.ToLower(s), "e")
	if hasExp {
		if exp != "" && (exp[0] == '+' || exp[0] == '-') {
			exp = exp[1:]
		}
		if exp == "" || !allDigits(exp) {
			return false
		}
	}
	ip, fp, _ := strings.Cut(mant, ".")
	return (ip != "" || fp != "") && allDigits(ip) && allDigits(fp)
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
