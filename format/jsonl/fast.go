package jsonl

import (
	"unicode/utf16"
	"unicode/utf8"

	"github.com/sluicedata/sluice/format"
)

// decodeFlat decodes a record that is one flat JSON object (scalar values
// only) straight into out, without building a format.JSONObject. It
// reports false, leaving out untouched, for anything else — nested
// values, malformed text — which the general parser then handles (and
// reports). For the inputs it accepts it yields exactly what the general
// path yields (FuzzFlat compares the two).
func decodeFlat(b []byte, out format.Sample) bool {
	type kv struct {
		k string
		v any
	}
	var buf [16]kv
	kvs := buf[:0]
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		i++
	} else {
		for {
			if i >= len(b) || b[i] != '"' {
				return false
			}
			k, n, ok := flatString(b, i)
			if !ok {
				return false
			}
			i = skipWS(b, n)
			if i >= len(b) || b[i] != ':' {
				return false
			}
			i = skipWS(b, i+1)
			if i >= len(b) {
				return false
			}
			var v any
			switch c := b[i]; {
			case c == '"':
				s, n, ok := flatString(b, i)
				if !ok {
					return false
				}
				v, i = s, n
			case c == 't' && hasLit(b, i, "true"):
				v, i = true, i+4
			case c == 'f' && hasLit(b, i, "false"):
				v, i = false, i+5
			case c == 'n' && hasLit(b, i, "null"):
				v, i = nil, i+4
			case c == 'N' && hasLit(b, i, "NaN"):
				v, i = mustNumber("NaN"), i+3
			case c == 'I' && hasLit(b, i, "Infinity"):
				v, i = mustNumber("Infinity"), i+8
			case c == '-' && hasLit(b, i, "-Infinity"):
				v, i = mustNumber("-Infinity"), i+9
			case c == '-' || c >= '0' && c <= '9':
				n := numberEnd(b, i)
				if n < 0 {
					return false
				}
				x, err := number(format.JSONNumber(b[i:n]))
				if err != nil {
					return false
				}
				v, i = x, n
			default:
				return false // nested value or bad token
			}
			kvs = append(kvs, kv{k, v})
			i = skipWS(b, i)
			if i < len(b) && b[i] == ',' {
				i = skipWS(b, i+1)
				continue
			}
			if i < len(b) && b[i] == '}' {
				i++
				break
			}
			return false
		}
	}
	if skipWS(b, i) != len(b) {
		return false
	}
	for _, e := range kvs {
		out[e.k] = e.v
	}
	return true
}

func mustNumber(s string) any {
	v, _ := number(format.JSONNumber(s))
	return v
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

func hasLit(b []byte, i int, lit string) bool {
	return len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit
}

// numberEnd returns the end of the JSON number at b[i:], -1 if the text
// there is not one.
func numberEnd(b []byte, i int) int {
	if b[i] == '-' {
		i++
	}
	start := i
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	if i == start || (i-start > 1 && b[start] == '0') {
		return -1
	}
	if i < len(b) && b[i] == '.' {
		i++
		s := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == s {
			return -1
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		s := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == s {
			return -1
		}
	}
	return i
}

// flatString parses the JSON string starting at b[i] == '"' and returns
// it and the position after its closing quote.
func flatString(b []byte, i int) (string, int, bool) {
	i++
	start := i
	for i < len(b) && b[i] != '"' && b[i] != '\\' && b[i] >= 0x20 {
		i++
	}
	if i < len(b) && b[i] == '"' {
		return string(b[start:i]), i + 1, true
	}
	out := append(make([]byte, 0, i-start+16), b[start:i]...)
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			return string(out), i + 1, true
		case c < 0x20:
			return "", 0, false
		case c != '\\':
			out = append(out, c)
			i++
			continue
		}
		if i+1 >= len(b) {
			return "", 0, false
		}
		e := b[i+1]
		i += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := hex4(b, i)
			if !ok {
				return "", 0, false
			}
			i += 4
			if utf16.IsSurrogate(r) && i+6 <= len(b) && b[i] == '\\' && b[i+1] == 'u' {
				if r2, ok := hex4(b, i+2); ok {
					if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
						out = utf8.AppendRune(out, d)
						i += 6
						continue
					}
				}
			}
			out = utf8.AppendRune(out, r) // a lone surrogate becomes U+FFFD
		default:
			return "", 0, false
		}
	}
	return "", 0, false
}

func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return r, true
}
