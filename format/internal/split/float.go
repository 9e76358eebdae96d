package split

import (
	"math"
	"strconv"
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
