package format

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"sort"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// maxJSONDepth bounds nesting when parsing untrusted JSON text.
const maxJSONDepth = 1000

// AppendJSONString appends s as a JSON string literal escaped the way
// Python's json.dumps does by default (ensure_ascii): \" \\ \b \f \n \r \t,
// every other byte outside U+0020..U+007E as \uXXXX with lowercase hex,
// characters above U+FFFF as surrogate pairs. Invalid UTF-8 bytes are
// written as U+FFFD.
func AppendJSONString(dst []byte, s string) []byte {
	return appendJSONString(dst, s, true)
}

// AppendJSONStringUTF8 appends s as Python's json.dumps(ensure_ascii=False)
// writes it: only \" \\ and the control characters below U+0020 are
// escaped; everything else is written as UTF-8. Invalid UTF-8 bytes are
// written as U+FFFD.
func AppendJSONStringUTF8(dst []byte, s string) []byte {
	return appendJSONString(dst, s, false)
}

func appendJSONString(dst []byte, s string, ascii bool) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		// Printable ASCII needs no escape; with ascii=false neither does
		// U+007F.
		if c >= 0x20 && c != '"' && c != '\\' && (c < 0x7f || (!ascii && c == 0x7f)) {
			i++
			continue
		}
		if !ascii && c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r != utf8.RuneError || size > 1 {
				i += size
				continue
			}
			dst = append(dst, s[start:i]...)
			dst = utf8.AppendRune(dst, utf8.RuneError)
			i++
			start = i
			continue
		}
		dst = append(dst, s[start:i]...)
		if c < utf8.RuneSelf {
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r > 0xffff {
			r1, r2 := utf16.EncodeRune(r)
			dst = appendU4(dst, r1)
			dst = appendU4(dst, r2)
		} else {
			dst = appendU4(dst, r)
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

func appendU4(dst []byte, r rune) []byte {
	const hex = "0123456789abcdef"
	return append(dst, '\\', 'u', hex[r>>12&15], hex[r>>8&15], hex[r>>4&15], hex[r&15])
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
	return AppendPyFloat(dst, x, 64)
}

// AppendJSON appends v as Python's json.dumps(v, sort_keys=sortKeys) text
// with default separators (ensure_ascii escaping; see AppendJSONUTF8). v may be nil, bool, string, JSONNumber, float64,
// float32, any Go integer, *big.Int, []any, *JSONObject (keys in its order
// unless sortKeys), map[string]any (always sorted), or JSON (raw text, which
// is parsed and re-emitted).
func AppendJSON(dst []byte, v any, sortKeys bool) ([]byte, error) {
	return jsonEnc{sortKeys: sortKeys, ascii: true}.append(dst, v, 0)
}

// AppendJSONUTF8 is AppendJSON with ensure_ascii=False: strings are
// written as UTF-8 (see AppendJSONStringUTF8).
func AppendJSONUTF8(dst []byte, v any, sortKeys bool) ([]byte, error) {
	return jsonEnc{sortKeys: sortKeys}.append(dst, v, 0)
}

type jsonEnc struct {
	sortKeys, ascii bool
}

func (e jsonEnc) append(dst []byte, v any, depth int) ([]byte, error) {
	sortKeys := e.sortKeys
	if depth > maxJSONDepth {
		return dst, errors.New("json value nested too deeply")
	}
	switch v := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case bool:
		if v {
			return append(dst, "true"...), nil
		}
		return append(dst, "false"...), nil
	case string:
		return appendJSONString(dst, v, e.ascii), nil
	case JSONNumber:
		return appendJSONNumber(dst, v)
	case float64:
		return AppendJSONFloat(dst, v), nil
	case float32:
		return AppendJSONFloat(dst, float64(v)), nil
	case int:
		return strconv.AppendInt(dst, int64(v), 10), nil
	case int8:
		return strconv.AppendInt(dst, int64(v), 10), nil
	case int16:
		return strconv.AppendInt(dst, int64(v), 10), nil
	case int32:
		return strconv.AppendInt(dst, int64(v), 10), nil
	case int64:
		return strconv.AppendInt(dst, v, 10), nil
	case uint:
		return strconv.AppendUint(dst, uint64(v), 10), nil
	case uint8:
		return strconv.AppendUint(dst, uint64(v), 10), nil
	case uint16:
		return strconv.AppendUint(dst, uint64(v), 10), nil
	case uint32:
		return strconv.AppendUint(dst, uint64(v), 10), nil
	case uint64:
		return strconv.AppendUint(dst, v, 10), nil
	case *big.Int:
		return v.Append(dst, 10), nil
	case JSON:
		p, err := ParseJSON(v)
		if err != nil {
			return dst, err
		}
		return e.append(dst, p, depth)
	case []any:
		dst = append(dst, '[')
		for i, x := range v {
			if i > 0 {
				dst = append(dst, ", "...)
			}
			var err error
			if dst, err = e.append(dst, x, depth+1); err != nil {
				return dst, err
			}
		}
		return append(dst, ']'), nil
	case *JSONObject:
		keys := v.Keys
		if sortKeys {
			keys = append([]string(nil), keys...)
			sort.Strings(keys)
		}
		return e.appendObject(dst, keys, v.Values, depth)
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return e.appendObject(dst, keys, v, depth)
	}
	return dst, fmt.Errorf("cannot encode %T as json", v)
}

func (e jsonEnc) appendObject(dst []byte, keys []string, vals map[string]any, depth int) ([]byte, error) {
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ", "...)
		}
		dst = appendJSONString(dst, k, e.ascii)
		dst = append(dst, ": "...)
		var err error
		if dst, err = e.append(dst, vals[k], depth+1); err != nil {
			return dst, err
		}
	}
	return append(dst, '}'), nil
}

// appendJSONNumber writes a number the way Python re-serializes what it
// parsed: integers unchanged (but "-0" is 0), floats through float repr.
func appendJSONNumber(dst []byte, n JSONNumber) ([]byte, error) {
	s := string(n)
	switch s {
	case "NaN", "Infinity", "-Infinity":
		return append(dst, s...), nil
	}
	if isJSONInt(s) {
		if s == "-0" {
			return append(dst, '0'), nil
		}
		return append(dst, s...), nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		var ne *strconv.NumError
		if !errors.As(err, &ne) || ne.Err != strconv.ErrRange {
			return dst, fmt.Errorf("bad json number %q", s)
		}
	}
	return AppendJSONFloat(dst, f), nil
}

func isJSONInt(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && !(i == 0 && c == '-') {
			return false
		}
	}
	return true
}

// ParseJSON parses one JSON value as Python's json.loads does, including
// the NaN, Infinity and -Infinity tokens. Values are nil, bool, string,
// JSONNumber (the number's text), []any and *JSONObject. Surrounding
// whitespace is allowed; anything else after the value is an error.
// Nesting is bounded, so hostile input cannot exhaust the stack.
func ParseJSON(b []byte) (any, error) {
	p := jsonParser{b: b}
	p.ws()
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.ws()
	if p.i != len(p.b) {
		return nil, p.errf("extra data after value")
	}
	return v, nil
}

type jsonParser struct {
	b []byte
	i int
	// base is the input offset of b[0] (a streaming parse holds a window).
	base int64
}

func (p *jsonParser) errf(format string, args ...any) error {
	return fmt.Errorf("json: offset %d: %s", p.base+int64(p.i), fmt.Sprintf(format, args...))
}

func (p *jsonParser) ws() {
	if p.i < len(p.b) && p.b[p.i] > ' ' {
		return
	}
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *jsonParser) lit(s string) bool {
	if len(p.b)-p.i >= len(s) && string(p.b[p.i:p.i+len(s)]) == s {
		p.i += len(s)
		return true
	}
	return false
}

func (p *jsonParser) value(depth int) (any, error) {
	if depth > maxJSONDepth {
		return nil, p.errf("nested too deeply")
	}
	if p.i >= len(p.b) {
		return nil, p.errf("unexpected end of input")
	}
	switch c := p.b[p.i]; {
	case c == '{':
		p.i++
		obj := &JSONObject{Values: map[string]any{}}
		p.ws()
		if p.i < len(p.b) && p.b[p.i] == '}' {
			p.i++
			return obj, nil
		}
		for {
			p.ws()
			if p.i >= len(p.b) || p.b[p.i] != '"' {
				return nil, p.errf("expected object key")
			}
			k, err := p.str()
			if err != nil {
				return nil, err
			}
			p.ws()
			if p.i >= len(p.b) || p.b[p.i] != ':' {
				return nil, p.errf("expected ':'")
			}
			p.i++
			p.ws()
			v, err := p.value(depth + 1)
			if err != nil {
				return nil, err
			}
			if _, dup := obj.Values[k]; !dup {
				obj.Keys = append(obj.Keys, k)
			}
			obj.Values[k] = v
			p.ws()
			if p.i < len(p.b) && p.b[p.i] == ',' {
				p.i++
				continue
			}
			if p.i < len(p.b) && p.b[p.i] == '}' {
				p.i++
				return obj, nil
			}
			return nil, p.errf("expected ',' or '}'")
		}
	case c == '[':
		p.i++
		arr := []any{}
		p.ws()
		if p.i < len(p.b) && p.b[p.i] == ']' {
			p.i++
			return arr, nil
		}
		for {
			p.ws()
			v, err := p.value(depth + 1)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
			p.ws()
			if p.i < len(p.b) && p.b[p.i] == ',' {
				p.i++
				continue
			}
			if p.i < len(p.b) && p.b[p.i] == ']' {
				p.i++
				return arr, nil
			}
			return nil, p.errf("expected ',' or ']'")
		}
	case c == '"':
		return p.str()
	case p.lit("null"):
		return nil, nil
	case p.lit("true"):
		return true, nil
	case p.lit("false"):
		return false, nil
	case p.lit("NaN"):
		return JSONNumber("NaN"), nil
	case p.lit("Infinity"):
		return JSONNumber("Infinity"), nil
	case p.lit("-Infinity"):
		return JSONNumber("-Infinity"), nil
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	}
	return nil, p.errf("unexpected character %q", p.b[p.i])
}

func (p *jsonParser) number() (any, error) {
	start := p.i
	if err := p.skipNumber(); err != nil {
		return nil, err
	}
	return JSONNumber(p.b[start:p.i]), nil
}

// skipNumber moves past a number, checking its grammar.
func (p *jsonParser) skipNumber() error {
	if p.b[p.i] == '-' {
		p.i++
	}
	digits := func() int {
		n := 0
		for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	intStart := p.i
	if n := digits(); n == 0 {
		return p.errf("bad number")
	} else if n > 1 && p.b[intStart] == '0' {
		return p.errf("bad number: leading zero")
	}
	if p.i < len(p.b) && p.b[p.i] == '.' {
		p.i++
		if digits() == 0 {
			return p.errf("bad number")
		}
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		p.i++
		if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return p.errf("bad number")
		}
	}
	return nil
}

func (p *jsonParser) str() (string, error) {
	p.i++ // opening quote
	// Fast path: no escapes.
	start := p.i
	for p.i < len(p.b) {
		c := p.b[p.i]
		if c == '"' {
			s := string(p.b[start:p.i])
			p.i++
			return s, nil
		}
		if c == '\\' || c < 0x20 {
			break
		}
		p.i++
	}
	buf := append([]byte(nil), p.b[start:p.i]...)
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			return string(buf), nil
		case c < 0x20:
			return "", p.errf("control character in string")
		case c != '\\':
			buf = append(buf, c)
			p.i++
			continue
		}
		p.i++
		if p.i >= len(p.b) {
			break
		}
		e := p.b[p.i]
		p.i++
		switch e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return "", p.errf("bad \\u escape")
			}
			if utf16.IsSurrogate(r) && p.i+6 <= len(p.b) && p.b[p.i] == '\\' && p.b[p.i+1] == 'u' {
				save := p.i
				p.i += 2
				if r2, ok := p.hex4(); ok {
					if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
						buf = utf8.AppendRune(buf, d)
						continue
					}
				}
				p.i = save
			}
			buf = utf8.AppendRune(buf, r) // lone surrogate → U+FFFD
		default:
			return "", p.errf("bad escape")
		}
	}
	return "", p.errf("unterminated string")
}

func (p *jsonParser) hex4() (rune, bool) {
	if p.i+4 > len(p.b) {
		return 0, false
	}
	var r rune
	for _, c := range p.b[p.i : p.i+4] {
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
	p.i += 4
	return r, true
}
