package input

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxLineBytes bounds one JSON line.
const MaxLineBytes = 256 << 20

// jsonlFile reads the lines of one JSON-lines file.
type jsonlFile struct {
	name string
	rc   io.ReadCloser
	br   *bufio.Reader
	line int64
}

func openJSONLFile(ctx context.Context, l location) (fileReader, error) {
	rc, err := l.b.NewRangeReader(ctx, l.key, 0, -1)
	if err != nil {
		return nil, fmt.Errorf("input: open %s: %w", l.name, err)
	}
	br := bufio.NewReaderSize(rc, 1<<20)
	dropBOM(br)
	return &jsonlFile{name: l.name, rc: rc, br: br}, nil
}

func (f *jsonlFile) read(ctx context.Context, dst []Item, limit int) ([]Item, error) {
	// Arena chunks per call: the items of a batch slice into them, and they
	// are never reused, so items stay valid while the batch is in flight.
	const chunk = 32 << 10
	arena := make([]byte, 0, chunk)
	for n := 0; n < limit; {
		if n&1023 == 0 {
			if err := ctx.Err(); err != nil {
				return dst, err
			}
		}
		line, err := f.br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			long := append([]byte(nil), line...)
			for err == bufio.ErrBufferFull {
				line, err = f.br.ReadSlice('\n')
				long = append(long, line...)
				if len(long) > MaxLineBytes {
					return dst, fmt.Errorf("input: %s:%d: line longer than %d bytes", f.name, f.line+1, MaxLineBytes)
				}
			}
			line = long
		}
		if err != nil && err != io.EOF {
			return dst, fmt.Errorf("input: read %s: %w", f.name, err)
		}
		if len(line) > 0 {
			f.line++
			trimmed := bytes.TrimSpace(line)
			if len(trimmed) > 0 {
				// Items keep pointing into full chunks; a new chunk starts
				// when the line does not fit.
				if cap(arena)-len(arena) < len(trimmed) {
					arena = make([]byte, 0, max(chunk, len(trimmed)))
				}
				start := len(arena)
				arena = append(arena, trimmed...)
				data := arena[start:len(arena):len(arena)]
				dst = append(dst, Item{File: f.name, Pos: f.line, Data: data})
				n++
			}
		}
		if err == io.EOF {
			if n == 0 {
				return dst, io.EOF
			}
			return dst, nil
		}
	}
	return dst, nil
}

func (f *jsonlFile) close() error { return f.rc.Close() }

// decodeJSONL decodes one line holding a JSON object.
func decodeJSONL(_ context.Context, it *Item, fn FieldFunc) error {
	if err := DecodeObject(it.Data, fn); err != nil {
		return fmt.Errorf("input: %s: %w", it.Loc(), err)
	}
	return nil
}

// ErrSyntax is matched by errors for malformed JSON.
var ErrSyntax = errors.New("invalid JSON")

// maxDepth bounds nesting, so hostile input cannot exhaust the stack.
const maxDepth = 512

type jsonScanner struct {
	b   []byte
	i   int
	buf []byte // unescape buffer for keys
}

func (s *jsonScanner) errf(format string, args ...any) error {
	return fmt.Errorf("%w at byte %d: %s", ErrSyntax, s.i, fmt.Sprintf(format, args...))
}

func (s *jsonScanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// DecodeObject parses b, which must hold one JSON object, and calls fn for
// each member in document order. Strings are unescaped, integers that fit
// in int64 become Int and other numbers Float, objects and arrays are
// returned as their JSON text (kind JSON). Names and values may alias b.
func DecodeObject(b []byte, fn FieldFunc) error {
	s := jsonScanner{b: b}
	s.ws()
	if s.i >= len(b) || b[s.i] != '{' {
		return s.errf("want a JSON object")
	}
	s.i++
	s.ws()
	if s.i < len(b) && b[s.i] == '}' {
		s.i++
	} else {
		for {
			s.ws()
			if s.i >= len(b) || b[s.i] != '"' {
				return s.errf("want a member name")
			}
			name, err := s.str(true)
			if err != nil {
				return err
			}
			s.ws()
			if s.i >= len(b) || b[s.i] != ':' {
				return s.errf("want ':'")
			}
			s.i++
			s.ws()
			v, err := s.value()
			if err != nil {
				return err
			}
			if err := fn(name, v); err != nil {
				return err
			}
			s.ws()
			if s.i >= len(b) {
				return s.errf("unterminated object")
			}
			if b[s.i] == ',' {
				s.i++
				continue
			}
			if b[s.i] == '}' {
				s.i++
				break
			}
			return s.errf("want ',' or '}'")
		}
	}
	s.ws()
	if s.i != len(b) {
		return s.errf("data after the object")
	}
	return nil
}

func (s *jsonScanner) value() (Value, error) {
	if s.i >= len(s.b) {
		return Value{}, s.errf("want a value")
	}
	switch c := s.b[s.i]; {
	case c == '"':
		str, err := s.str(false)
		return Value{Kind: String, Bytes: str}, err
	case c == '{' || c == '[':
		start := s.i
		if err := s.skip(0); err != nil {
			return Value{}, err
		}
		return Value{Kind: JSON, Bytes: s.b[start:s.i:s.i]}, nil
	case c == 't':
		return Value{Kind: Bool, Int: 1}, s.lit("true")
	case c == 'f':
		return Value{Kind: Bool}, s.lit("false")
	case c == 'n':
		return Value{Kind: Null}, s.lit("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number()
	}
	return Value{}, s.errf("unexpected %q", s.b[s.i])
}

func (s *jsonScanner) lit(w string) error {
	if len(s.b)-s.i < len(w) || string(s.b[s.i:s.i+len(w)]) != w {
		return s.errf("bad literal")
	}
	s.i += len(w)
	return nil
}

func (s *jsonScanner) numberEnd() (end int, isInt bool, err error) {
	i, b := s.i, s.b
	if i < len(b) && b[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if i < len(b) && b[i] == '0' {
		i++
	} else if digits() == 0 {
		return 0, false, s.errf("bad number")
	}
	isInt = true
	if i < len(b) && b[i] == '.' {
		i++
		isInt = false
		if digits() == 0 {
			return 0, false, s.errf("bad number")
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		isInt = false
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return 0, false, s.errf("bad number")
		}
	}
	return i, isInt, nil
}

func (s *jsonScanner) number() (Value, error) {
	end, isInt, err := s.numberEnd()
	if err != nil {
		return Value{}, err
	}
	text := s.b[s.i:end]
	s.i = end
	if isInt && len(text) < 19 {
		// Fast path: at most 18 digits always fit in int64.
		var v int64
		neg := text[0] == '-'
		d := text
		if neg {
			d = d[1:]
		}
		for _, c := range d {
			v = v*10 + int64(c-'0')
		}
		if neg {
			v = -v
		}
		return Value{Kind: Int, Int: v}, nil
	}
	if isInt {
		if v, err := strconv.ParseInt(string(text), 10, 64); err == nil {
			return Value{Kind: Int, Int: v}, nil
		}
	}
	f, err := strconv.ParseFloat(string(text), 64)
	if err != nil && !math.IsInf(f, 0) {
		return Value{}, s.errf("bad number %q", text)
	}
	return Value{Kind: Float, Float: f}, nil
}

// str parses a string literal at s.i and returns its unescaped bytes. For
// keys the result may live in s.buf, which the next key overwrites.
func (s *jsonScanner) str(key bool) ([]byte, error) {
	s.i++ // opening quote
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		if c == '"' {
			out := s.b[start:s.i:s.i]
			s.i++
			if !utf8.Valid(out) {
				return nil, s.errf("invalid UTF-8 in string")
			}
			return out, nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return nil, s.errf("control character in string")
		}
		s.i++
	}
	// Slow path: escapes.
	var out []byte
	if key {
		out = append(s.buf[:0], s.b[start:s.i]...)
	} else {
		out = append([]byte(nil), s.b[start:s.i]...)
	}
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			if key {
				s.buf = out
			}
			if !utf8.Valid(out) {
				return nil, s.errf("invalid UTF-8 in string")
			}
			return out, nil
		case c < 0x20:
			return nil, s.errf("control character in string")
		case c != '\\':
			out = append(out, c)
			s.i++
			continue
		}
		s.i++
		if s.i >= len(s.b) {
			break
		}
		e := s.b[s.i]
		s.i++
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
			r, ok := s.hex4()
			if !ok {
				return nil, s.errf("bad \\u escape")
			}
			if utf16.IsSurrogate(r) {
				r2 := utf8.RuneError
				if s.i+1 < len(s.b) && s.b[s.i] == '\\' && s.b[s.i+1] == 'u' {
					save := s.i
					s.i += 2
					if lo, ok := s.hex4(); ok {
						if d := utf16.DecodeRune(r, lo); d != utf8.RuneError {
							r2 = d
						} else {
							s.i = save
						}
					} else {
						return nil, s.errf("bad \\u escape")
					}
				}
				r = r2
			}
			out = utf8.AppendRune(out, r)
		default:
			return nil, s.errf("bad escape \\%c", e)
		}
	}
	return nil, s.errf("unterminated string")
}

func (s *jsonScanner) hex4() (rune, bool) {
	if len(s.b)-s.i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range s.b[s.i : s.i+4] {
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
	s.i += 4
	return r, true
}

// skip validates and skips one value (used for nested objects and arrays).
func (s *jsonScanner) skip(depth int) error {
	if depth > maxDepth {
		return s.errf("nesting deeper than %d", maxDepth)
	}
	s.ws()
	if s.i >= len(s.b) {
		return s.errf("want a value")
	}
	switch s.b[s.i] {
	case '{', '[':
		open := s.b[s.i]
		close := byte('}')
		if open == '[' {
			close = ']'
		}
		s.i++
		s.ws()
		if s.i < len(s.b) && s.b[s.i] == close {
			s.i++
			return nil
		}
		for {
			s.ws()
			if open == '{' {
				if s.i >= len(s.b) || s.b[s.i] != '"' {
					return s.errf("want a member name")
				}
				if _, err := s.str(true); err != nil {
					return err
				}
				s.ws()
				if s.i >= len(s.b) || s.b[s.i] != ':' {
					return s.errf("want ':'")
				}
				s.i++
			}
			if err := s.skip(depth + 1); err != nil {
				return err
			}
			s.ws()
			if s.i >= len(s.b) {
				return s.errf("unterminated %c", open)
			}
			if s.b[s.i] == ',' {
				s.i++
				continue
			}
			if s.b[s.i] == close {
				s.i++
				return nil
			}
			return s.errf("want ',' or %q", close)
		}
	case '"':
		_, err := s.str(true)
		return err
	}
	_, err := s.value()
	return err
}
