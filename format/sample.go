package format

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
)

// Sample is one decoded sample: column name → value. Decoders return these
// dynamic types (none of them aliases the shard's storage):
//
//	encoding                         Go value
//	bytes                            []byte
//	str                              string
//	int                              int64
//	uint8 uint16 uint32 uint64       uint8 uint16 uint32 uint64
//	int8 int16 int32 int64           int8 int16 int32 int64
//	float16 float32 float64          Float16 float32 float64
//	str_int                          *big.Int
//	str_float                        float64
//	str_decimal                      Decimal
//	json                             JSON
//	pkl                              Pickle (never executed)
//	ndarray[:dtype[:shape]]          *NDArray
//	jpeg png pil                     *Image
//	list[jpeg] list[png] list[pil]   []*Image
//	jpeg_array                       []*Image
//
// The split formats (JSON lines, CSV/TSV/XSV) decode str to string, int to
// int64 (or *big.Int beyond 64 bits) and float to float64; a JSON-lines
// record decodes to its whole object, with JSON values as ParseJSON returns them.
//
// Writers accept the same types and a few conveniences documented by each
// writer. A []byte value is written unchanged whatever the column's
// encoding, as MosaicML does (the pass-through rule).
type Sample map[string]any

// Float16 is an IEEE-754 binary16 value, stored as its bits.
type Float16 uint16

// Float32 returns f as a float32 (exact).
func (f Float16) Float32() float32 {
	h := uint32(f)
	sign := (h >> 15) & 1
	exp := (h >> 10) & 0x1f
	frac := h & 0x3ff
	var bits uint32
	switch {
	case exp == 0 && frac == 0:
		bits = sign << 31
	case exp == 0: // subnormal: normalise
		e := int32(0)
		for frac&0x400 == 0 {
			frac <<= 1
			e--
		}
		frac &= 0x3ff
		bits = sign<<31 | uint32(int32(127-15)+e+1)<<23 | frac<<13
	case exp == 0x1f:
		bits = sign<<31 | 0xff<<23 | frac<<13
	default:
		bits = sign<<31 | (exp+127-15)<<23 | frac<<13
	}
	return math.Float32frombits(bits)
}

// Float64 returns f as a float64 (exact).
func (f Float16) Float64() float64 { return float64(f.Float32()) }

// String formats f as numpy's repr of a float16 scalar: the shortest
// decimal that rounds back to the same binary16 value.
func (f Float16) String() string { return FormatFloat16(f) }

// Float16From rounds x to the nearest binary16 value (ties to even), as
// numpy's float16 conversion does. Values beyond the range become ±Inf.
func Float16From(x float64) Float16 {
	// Convert via float32 bits would double-round; do it from float64.
	b := math.Float64bits(x)
	sign := uint16(b>>48) & 0x8000
	exp := int((b >> 52) & 0x7ff)
	mant := b & (1<<52 - 1)
	if exp == 0x7ff {
		if mant != 0 {
			return Float16(sign | 0x7e00)
		}
		return Float16(sign | 0x7c00)
	}
	e := exp - 1023 + 15
	if e >= 0x1f {
		return Float16(sign | 0x7c00)
	}
	if e <= 0 {
		// Subnormal half (or zero): shift the full mantissa.
		if e < -10 {
			return Float16(sign)
		}
		m := mant | 1<<52
		shift := uint(1 - e + 42)
		half := m >> shift
		rem := m & (1<<shift - 1)
		mid := uint64(1) << (shift - 1)
		if rem > mid || (rem == mid && half&1 == 1) {
			half++
		}
		return Float16(sign | uint16(half))
	}
	half := uint64(e)<<10 | mant>>42
	rem := mant & (1<<42 - 1)
	const mid = 1 << 41
	if rem > mid || (rem == mid && half&1 == 1) {
		half++ // may carry into the exponent, even up to Inf: correct
	}
	return Float16(sign | uint16(half))
}

// Decimal is the text of a Python decimal.Decimal (str_decimal), such as
// "1.10", "1E+3" or "-0.000". It is kept as text because Go has no exact
// decimal type.
type Decimal string

// JSON is the UTF-8 text of a JSON value as Python's json.dumps wrote it. It
// may contain the non-standard tokens NaN, Infinity and -Infinity; parse it
// with ParseJSON.
type JSON []byte

// Pickle holds the raw bytes of a Python pickle (encoding pkl). Sluice never
// unpickles: loading a pickle can run arbitrary code.
type Pickle []byte

// JSONNumber is a JSON number kept as its text, so that integers of any
// size and floats survive exactly.
type JSONNumber string

// JSONObject is a decoded JSON object that keeps its key order.
type JSONObject struct {
	// Keys in document order (duplicates removed: the last value wins, at
	// the position of the first occurrence, as Python does).
	Keys []string
	// Values by key.
	Values map[string]any
}

// NDArray is a decoded ndarray column: dtype name, shape and the raw
// little-endian values in C (row-major) order.
type NDArray struct {
	// DType is one of uint8 uint16 uint32 uint64 int8 int16 int32 int64
	// float16 float32 float64.
	DType string
	// Shape has one entry per dimension, each at least 1.
	Shape []int
	// Data holds product(Shape) values of DType, little-endian.
	Data []byte
}

// DTypeSize returns the byte size of one value of dtype, or 0 if dtype is
// not one of the ndarray dtypes.
func DTypeSize(dtype string) int {
	switch dtype {
	case "uint8", "int8":
		return 1
	case "uint16", "int16", "float16":
		return 2
	case "uint32", "int32", "float32":
		return 4
	case "uint64", "int64", "float64":
		return 8
	}
	return 0
}

// Len returns the number of values.
func (a *NDArray) Len() int {
	if s := DTypeSize(a.DType); s > 0 {
		return len(a.Data) / s
	}
	return 0
}

// Float64 returns value i converted to float64 (exact for every dtype
// except 64-bit integers beyond 2^53). Like a slice index, it panics if i
// is out of range or DType is not one DTypeSize knows; decoders only
// produce arrays with valid dtypes and sizes.
func (a *NDArray) Float64(i int) float64 {
	switch a.DType {
	case "uint8":
		return float64(a.Data[i])
	case "int8":
		return float64(int8(a.Data[i]))
	case "uint16":
		return float64(binary.LittleEndian.Uint16(a.Data[2*i:]))
	case "int16":
		return float64(int16(binary.LittleEndian.Uint16(a.Data[2*i:])))
	case "float16":
		return Float16(binary.LittleEndian.Uint16(a.Data[2*i:])).Float64()
	case "uint32":
		return float64(binary.LittleEndian.Uint32(a.Data[4*i:]))
	case "int32":
		return float64(int32(binary.LittleEndian.Uint32(a.Data[4*i:])))
	case "float32":
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(a.Data[4*i:])))
	case "uint64":
		return float64(binary.LittleEndian.Uint64(a.Data[8*i:]))
	case "int64":
		return float64(int64(binary.LittleEndian.Uint64(a.Data[8*i:])))
	case "float64":
		return math.Float64frombits(binary.LittleEndian.Uint64(a.Data[8*i:]))
	}
	panic(fmt.Sprintf("format: NDArray with unknown dtype %q", a.DType))
}

// Image is a decoded image column value. Pix holds the pixels as Pillow's
// Image.tobytes() lays them out for Mode: rows top to bottom, interleaved
// bands, one byte per band for L, LA, RGB, RGBA, CMYK and palette indices
// for P.
type Image struct {
	// Format is "JPEG" or "PNG" for encoded images and "" for raw pil.
	Format string
	// Mode is the Pillow mode: "L", "LA", "RGB", "RGBA", "P", "I;16", ...
	Mode string
	// Width and Height in pixels.
	Width, Height int
	// Pix holds the pixels (see the type doc).
	Pix []byte
	// Encoded is the encoded file for JPEG and PNG (nil for raw pil).
	Encoded []byte
}

// FormatFloat16 formats a binary16 value the way numpy's repr does: the
// shortest decimal that reads back to the same value, positional for
// magnitudes in [1e-4, 1e16), otherwise scientific.
func FormatFloat16(f Float16) string {
	x := f.Float64()
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return FormatPyFloat(x)
	}
	// Shortest digit count whose decimal rounds back to f.
	for prec := 1; prec <= 17; prec++ {
		var buf [32]byte
		s := strconv.AppendFloat(buf[:0], x, 'e', prec-1, 64)
		y, err := strconv.ParseFloat(string(s), 64)
		if err == nil && Float16From(y) == f {
			return string(appendRepr(nil, s))
		}
	}
	return FormatPyFloat(x)
}

// FormatPyFloat formats x as Python's repr(float) (also str_float's text):
// "1.0", "0.1", "1e-05", "1e+16", "inf", "-inf", "nan".
func FormatPyFloat(x float64) string {
	return string(AppendPyFloat(nil, x, 64))
}

// AppendPyFloat appends the Python repr of x, using the shortest digits
// that round-trip at bitSize (32 gives numpy's float32 repr, 64 Python's
// float repr). It does not allocate beyond growing dst.
func AppendPyFloat(dst []byte, x float64, bitSize int) []byte {
	switch {
	case math.IsNaN(x):
		return append(dst, "nan"...)
	case math.IsInf(x, 1):
		return append(dst, "inf"...)
	case math.IsInf(x, -1):
		return append(dst, "-inf"...)
	}
	var buf [32]byte
	return appendRepr(dst, strconv.AppendFloat(buf[:0], x, 'e', -1, bitSize))
}

// appendRepr appends Go's 'e' format s ("-1.2345e+06") in Python's repr
// layout: positional if -4 <= exp < 16, scientific otherwise.
func appendRepr(dst, s []byte) []byte {
	if s[0] == '-' {
		dst = append(dst, '-')
		s = s[1:]
	}
	epos := len(s) - 1
	for s[epos] != 'e' {
		epos--
	}
	exp := 0
	for _, c := range s[epos+2:] {
		exp = exp*10 + int(c-'0')
	}
	if s[epos+1] == '-' {
		exp = -exp
	}
	// digits: the mantissa without its point or trailing zeros (keeping
	// at least one digit).
	var dbuf [24]byte
	digits := append(dbuf[:0], s[0])
	if epos > 1 {
		digits = append(digits, s[2:epos]...)
	}
	for len(digits) > 1 && digits[len(digits)-1] == '0' {
		digits = digits[:len(digits)-1]
	}
	if exp >= -4 && exp < 16 {
		switch {
		case exp < 0:
			dst = append(dst, "0."...)
			for i := 0; i < -exp-1; i++ {
				dst = append(dst, '0')
			}
			return append(dst, digits...)
		case len(digits) <= exp+1:
			dst = append(dst, digits...)
			for i := len(digits); i < exp+1; i++ {
				dst = append(dst, '0')
			}
			return append(dst, ".0"...)
		default:
			dst = append(dst, digits[:exp+1]...)
			dst = append(dst, '.')
			return append(dst, digits[exp+1:]...)
		}
	}
	dst = append(dst, digits[0])
	if len(digits) > 1 {
		dst = append(dst, '.')
		dst = append(dst, digits[1:]...)
	}
	dst = append(dst, 'e')
	if exp < 0 {
		dst = append(dst, '-')
		exp = -exp
	} else {
		dst = append(dst, '+')
	}
	if exp < 10 {
		dst = append(dst, '0')
	}
	return strconv.AppendInt(dst, int64(exp), 10)
}
