package split

import (
	"crypto/sha256"
	"encoding/hex"
	"math"
	"strconv"

	"github.com/sluicedata/sluice/format"
)

// AppendPyFloat appends Python's repr of x ("1.0", "0.1", "1e-05",
// "1e+16", "inf", "-inf", "nan") without allocating. It gives the same
// text as format.FormatPyFloat (tests compare the two); JSON writers
// spell the non-finite values themselves.
func AppendPyFloat(dst []byte, x float64) []byte {
	switch {
	case math.IsNaN(x):
		return append(dst, "nan"...)
	case math.IsInf(x, 1):
		return append(dst, "inf"...)
	case math.IsInf(x, -1):
		return append(dst, "-inf"...)
	}
	var buf [32]byte
	s := strconv.AppendFloat(buf[:0], x, 'e', -1, 64) // [-]d[.ddd]e±XX
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
	// digits: the mantissa without its point (shortest, so no trailing
	// zeros except a lone "0").
	var dbuf [24]byte
	digits := append(dbuf[:0], s[0])
	if epos > 1 {
		digits = append(digits, s[2:epos]...)
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

// AppendJSONFloat appends x as Python's json.dumps writes a float: repr,
// with NaN, Infinity and -Infinity for the non-finite values.
func AppendJSONFloat(dst []byte, x float64) []byte {
	switch {
	case math.IsNaN(x):
		return append(dst, "NaN"...)
	case math.IsInf(x, 1):
		return append(dst, "Infinity"...)
	case math.IsInf(x, -1):
		return append(dst, "-Infinity"...)
	}
	return AppendPyFloat(dst, x)
}

// AppendDumpFloat appends the canonical dump form of a float64 (the
// reference fixtures' convention): {"bits": 16 hex digits, "s": repr}.
func AppendDumpFloat(dst []byte, x float64) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, `{"bits": "`...)
	b := math.Float64bits(x)
	for shift := 60; shift >= 0; shift -= 4 {
		dst = append(dst, hex[b>>uint(shift)&15])
	}
	dst = append(dst, `", "s": "`...)
	dst = AppendPyFloat(dst, x)
	return append(dst, `"}`...)
}

// AppendDumpColumn appends one column of a canonical dump line:
// "name": {"raw_len": n, "raw_sha256": hex, "v": <value>}; value appends
// the value's canonical form.
func AppendDumpColumn(dst []byte, name string, raw []byte, value func([]byte) ([]byte, error)) ([]byte, error) {
	dst = format.AppendJSONStringUTF8(dst, name)
	dst = append(dst, `: {"raw_len": `...)
	dst = strconv.AppendInt(dst, int64(len(raw)), 10)
	sum := sha256.Sum256(raw)
	dst = append(dst, `, "raw_sha256": "`...)
	dst = hex.AppendEncode(dst, sum[:])
	dst = append(dst, `", "v": `...)
	dst, err := value(dst)
	if err != nil {
		return dst, err
	}
	return append(dst, '}'), nil
}

// AppendDumpTail closes a canonical dump line: }, "i": i, "shard": k}.
func AppendDumpTail(dst []byte, i int64, k int) []byte {
	dst = append(dst, `}, "i": `...)
	dst = strconv.AppendInt(dst, i, 10)
	dst = append(dst, `, "shard": `...)
	dst = strconv.AppendInt(dst, int64(k), 10)
	return append(dst, '}')
}
