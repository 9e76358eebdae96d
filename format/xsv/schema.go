package xsv

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/big"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/sluicedata/sluice/format"
)

// The three format names, as index.json's "format" gives them.
const (
	CSV = "csv" // separator ","
	TSV = "tsv" // separator "\t"
	XSV = "xsv" // separator given by the writer, stored in the index
)

// maxIntDigits is Python's default limit on the digits int() parses
// (sys.int_max_str_digits); it also keeps hostile fields from costing
// quadratic time.
const maxIntDigits = 4300

type kind uint8

const (
	kStr kind = iota
	kInt
	kFloat
)

var kindNames = [...]string{"str", "int", "float"}

func parseKind(enc string) (kind, error) {
	switch enc {
	case "str":
		return kStr, nil
	case "int":
		return kInt, nil
	case "float":
		return kFloat, nil
	}
	return 0, fmt.Errorf("unsupported encoding %q (xsv columns are str, int or float)", enc)
}

// Schema is the layout of a CSV, TSV or XSV dataset: format, columns in
// record order, separator and newline. It encodes samples to lines and
// decodes lines to samples, without I/O. A Schema is immutable and safe
// for concurrent use.
type Schema struct {
	format  string
	names   []string
	encs    []string
	kinds   []kind
	sep     string
	newline string
	sepB    []byte // sep and newline as bytes, for the hot paths
	nlB     []byte
}

func (s *Schema) setBytes() *Schema {
	s.sepB, s.nlB = []byte(s.sep), []byte(s.newline)
	return s
}

// NewSchema validates a writer's arguments and returns the Schema:
// format is CSV, TSV or XSV ("" means CSV); columns maps name to "str",
// "int" or "float" (at least one), stored sorted by name; separator is
// required for XSV and must be "" or the fixed one for CSV and TSV;
// newline "" means "\n". As in MosaicML, column names must not contain
// the separator or the newline.
func NewSchema(format string, columns map[string]string, separator, newline string) (*Schema, error) {
	if format == "" {
		format = CSV
	}
	fixed := map[string]string{CSV: ",", TSV: "\t"}
	switch format {
	case CSV, TSV:
		if separator != "" && separator != fixed[format] {
			return nil, fmt.Errorf("xsv: %s separator is %q, not %q", format, fixed[format], separator)
		}
		separator = fixed[format]
	case XSV:
		if separator == "" {
			return nil, errors.New("xsv: format xsv needs a separator")
		}
	default:
		return nil, fmt.Errorf("xsv: unknown format %q (want csv, tsv or xsv)", format)
	}
	if newline == "" {
		newline = "\n"
	}
	if !utf8.ValidString(separator) || !utf8.ValidString(newline) {
		return nil, errors.New("xsv: separator and newline must be valid UTF-8")
	}
	if len(columns) == 0 {
		return nil, errors.New("xsv: writer needs columns")
	}
	s := &Schema{format: format, sep: separator, newline: newline}
	for name := range columns {
		s.names = append(s.names, name)
	}
	sort.Strings(s.names)
	for _, name := range s.names {
		if strings.Contains(name, newline) || strings.Contains(name, separator) {
			return nil, fmt.Errorf("xsv: column name %q contains the separator or the newline", name)
		}
		if !utf8.ValidString(name) {
			return nil, fmt.Errorf("xsv: column name %q is not valid UTF-8", name)
		}
		k, err := parseKind(columns[name])
		if err != nil {
			return nil, fmt.Errorf("xsv: column %q: %w", name, err)
		}
		s.encs = append(s.encs, columns[name])
		s.kinds = append(s.kinds, k)
	}
	return s.setBytes(), nil
}

// schemaOf builds the Schema of an index entry, for reading.
func schemaOf(info *format.ShardInfo) (*Schema, error) {
	s := &Schema{format: info.Format, names: info.ColumnNames, encs: info.ColumnEncodings, newline: info.Newline}
	switch info.Format {
	case CSV:
		s.sep = ","
	case TSV:
		s.sep = "\t"
	default:
		s.sep = info.Separator
	}
	if s.sep == "" {
		return nil, errors.New("empty separator")
	}
	if len(s.names) != len(s.encs) {
		return nil, fmt.Errorf("%d column names but %d encodings", len(s.names), len(s.encs))
	}
	for i, e := range s.encs {
		k, err := parseKind(e)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", s.names[i], err)
		}
		s.kinds = append(s.kinds, k)
	}
	return s.setBytes(), nil
}

// Format returns "csv", "tsv" or "xsv".
func (s *Schema) Format() string { return s.format }

// Names returns the column names in record order. The slice must not be
// modified.
func (s *Schema) Names() []string { return s.names }

// Encodings returns the column encodings aligned with Names. The slice
// must not be modified.
func (s *Schema) Encodings() []string { return s.encs }

// Separator returns the field separator.
func (s *Schema) Separator() string { return s.sep }

// Newline returns the line terminator.
func (s *Schema) Newline() string { return s.newline }

// AppendHeader appends the data file's first line: the column names
// joined by the separator, then the newline.
func (s *Schema) AppendHeader(dst []byte) []byte {
	for i, n := range s.names {
		if i > 0 {
			dst = append(dst, s.sep...)
		}
		dst = append(dst, n...)
	}
	return append(dst, s.newline...)
}

// AppendRecord appends sample's line to dst, byte for byte what
// MosaicML's XSVWriter writes: each column's text in column order — a
// string as is, an int in decimal, a float as Python's repr ("1.0",
// "1e-05", "nan", "inf") — joined by the separator, then the newline.
// Other keys of sample are ignored.
//
// Accepted values: str columns take a string (valid UTF-8); int columns
// any Go integer type or *big.Int; float columns a float64 or float32.
// A text that contains the separator or the newline is refused, as in
// MosaicML. Unlike MosaicML, a bool in an int column is refused (Python
// writes "True", which its reader cannot parse back), and so is a line
// whose fields a multi-character separator would split differently.
func (s *Schema) AppendRecord(dst []byte, sample format.Sample) ([]byte, error) {
	start := len(dst)
	for i, name := range s.names {
		v, ok := sample[name]
		if !ok {
			return dst, fmt.Errorf("xsv: sample has no column %q", name)
		}
		if i > 0 {
			dst = append(dst, s.sep...)
		}
		at := len(dst)
		var err error
		if dst, err = appendValue(dst, s.kinds[i], v); err != nil {
			return dst, fmt.Errorf("xsv: column %q: %w", name, err)
		}
		if text := dst[at:]; bytes.Contains(text, s.sepB) || bytes.Contains(text, s.nlB) {
			return dst, fmt.Errorf("xsv: column %q: value %q contains the separator or the newline", name, text)
		}
	}
	if len(s.sep) > 1 && len(s.names) > 1 {
		// A multi-character separator can match across field boundaries
		// ("a"+"aa"+"b" splits as "", "ab"); refuse what would not read back.
		if err := s.checkSplit(dst[start:], sample); err != nil {
			return dst, err
		}
	}
	dst = append(dst, s.newline...)
	return dst, nil
}

// checkSplit verifies that line splits back into the same field texts.
func (s *Schema) checkSplit(line []byte, sample format.Sample) error {
	parts := strings.Split(string(line), s.sep)
	if len(parts) != len(s.names) {
		return fmt.Errorf("xsv: fields would not split back at separator %q", s.sep)
	}
	for i, name := range s.names {
		t, _ := appendValue(nil, s.kinds[i], sample[name])
		if parts[i] != string(t) {
			return fmt.Errorf("xsv: fields would not split back at separator %q", s.sep)
		}
	}
	return nil
}

func appendValue(dst []byte, k kind, v any) ([]byte, error) {
	switch k {
	case kStr:
		if s, ok := v.(string); ok {
			if !utf8.ValidString(s) {
				return dst, errors.New("string is not valid UTF-8")
			}
			return append(dst, s...), nil
		}
	case kInt:
		switch x := v.(type) {
		case int:
			return strconv.AppendInt(dst, int64(x), 10), nil
		case int8:
			return strconv.AppendInt(dst, int64(x), 10), nil
		case int16:
			return strconv.AppendInt(dst, int64(x), 10), nil
		case int32:
			return strconv.AppendInt(dst, int64(x), 10), nil
		case int64:
			return strconv.AppendInt(dst, x, 10), nil
		case uint:
			return strconv.AppendUint(dst, uint64(x), 10), nil
		case uint8:
			return strconv.AppendUint(dst, uint64(x), 10), nil
		case uint16:
			return strconv.AppendUint(dst, uint64(x), 10), nil
		case uint32:
			return strconv.AppendUint(dst, uint64(x), 10), nil
		case uint64:
			return strconv.AppendUint(dst, x, 10), nil
		case *big.Int:
			if x == nil {
				return dst, errors.New("nil *big.Int")
			}
			return x.Append(dst, 10), nil
		}
	case kFloat:
		switch x := v.(type) {
		case float64:
			return format.AppendPyFloat(dst, x, 64), nil
		case float32:
			return format.AppendPyFloat(dst, float64(x), 64), nil
		}
	}
	return dst, fmt.Errorf("value of type %T does not fit encoding %s", v, kindNames[k])
}

// Decode parses one line as MosaicML's XSVReader does: remove the
// newline, split at the separator, and parse each field as its column's
// encoding (str: the text; int: Python int(), giving int64 or *big.Int
// beyond 64 bits; float: Python float(), giving float64). Unlike Python,
// which silently drops fields or columns when the counts differ, a line
// with the wrong number of fields is an error. Errors match
// format.ErrCorrupt.
func (s *Schema) Decode(line []byte) (format.Sample, error) {
	out := make(format.Sample, len(s.names))
	if err := s.DecodeInto(line, out); err != nil {
		return nil, err
	}
	return out, nil
}

// DecodeInto is Decode into an existing Sample.
func (s *Schema) DecodeInto(line []byte, out format.Sample) error {
	if !bytes.HasSuffix(line, s.nlB) {
		return format.Corruptf("", "line does not end with the newline %q", s.newline)
	}
	if !utf8.Valid(line) {
		return format.Corruptf("", "line is not valid UTF-8")
	}
	text := string(line[:len(line)-len(s.newline)])
	if len(s.names) == 0 {
		if text != "" {
			return format.Corruptf("", "line has text but the shard has no columns")
		}
		return nil
	}
	if n := strings.Count(text, s.sep) + 1; n != len(s.names) {
		return format.Corruptf("", "line has %d fields, want %d", n, len(s.names))
	}
	for i, name := range s.names {
		field := text
		if i < len(s.names)-1 {
			k := strings.Index(text, s.sep)
			field, text = text[:k], text[k+len(s.sep):]
		}
		v, err := parseField(s.kinds[i], field)
		if err != nil {
			ce := format.Corruptf("", "column %q", name)
			ce.Err = err
			return ce
		}
		out[name] = v
	}
	return nil
}

func parseField(k kind, f string) (any, error) {
	switch k {
	case kInt:
		return ParseInt(f)
	case kFloat:
		return ParseFloat(f)
	}
	return f, nil
}

// pySpace reports whether r is whitespace to Python's str.strip() and
// int()/float() (Unicode White_Space plus the ASCII separators 0x1C-0x1F).
func pySpace(r rune) bool { return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f) }

// digitPart checks Python's digitpart grammar (digits, single underscores
// between digits) and returns the digits without underscores.
func digitPart(s string) (string, bool) {
	if s == "" || s[0] == '_' || s[len(s)-1] == '_' {
		return "", false
	}
	clean := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '_' {
			if s[i-1] == '_' {
				return "", false
			}
			clean = false
			continue
		}
		if c < '0' || c > '9' {
			return "", false
		}
	}
	if clean {
		return s, true
	}
	return strings.ReplaceAll(s, "_", ""), true
}

// ParseInt parses s as Python's int(s) does for ASCII text: surrounding
// whitespace, an optional sign, decimal digits with single underscores
// between them, leading zeros allowed. It returns an int64, or a *big.Int
// when the value does not fit. More than 4300 digits is an error, as in
// Python.
func ParseInt(s string) (any, error) {
	// Fast path: what strconv accepts in base 10 Python accepts alike.
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return i, nil
	}
	t := strings.TrimFunc(s, pySpace)
	neg := false
	if t != "" && (t[0] == '+' || t[0] == '-') {
		neg = t[0] == '-'
		t = t[1:]
	}
	d, ok := digitPart(t)
	if !ok {
		return nil, fmt.Errorf("invalid literal for int(): %q", s)
	}
	if len(d) > maxIntDigits {
		return nil, fmt.Errorf("integer of %d digits exceeds Python's limit of %d", len(d), maxIntDigits)
	}
	if neg {
		d = "-" + d
	}
	if i, err := strconv.ParseInt(d, 10, 64); err == nil {
		return i, nil
	}
	b, ok := new(big.Int).SetString(d, 10)
	if !ok {
		return nil, fmt.Errorf("invalid literal for int(): %q", s)
	}
	return b, nil
}

// ParseFloat parses s as Python's float(s) does for ASCII text:
// surrounding whitespace, an optional sign, then "inf", "infinity" or
// "nan" in any case, or a decimal with optional fraction and exponent and
// underscores between digits. Overflow gives ±Inf, as in Python.
func ParseFloat(s string) (float64, error) {
	// Fast path: over the characters [0-9.eE+-] strconv's decimal grammar
	// and Python's are the same.
	plain := s != ""
	for i := 0; i < len(s) && plain; i++ {
		c := s[i]
		plain = c >= '0' && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'
	}
	if plain {
		f, err := strconv.ParseFloat(s, 64)
		if err == nil || errors.Is(err, strconv.ErrRange) {
			return f, nil
		}
		return 0, fmt.Errorf("could not convert string to float: %q", s)
	}
	t := strings.TrimFunc(s, pySpace)
	body := t
	if body != "" && (body[0] == '+' || body[0] == '-') {
		body = body[1:]
	}
	switch strings.ToLower(body) {
	case "inf", "infinity":
		if t[0] == '-' {
			return math.Inf(-1), nil
		}
		return math.Inf(1), nil
	case "nan":
		return math.NaN(), nil
	}
	bad := errNotFloat(s)
	mant, exp := body, ""
	if k := strings.IndexAny(body, "eE"); k >= 0 {
		mant, exp = body[:k], body[k+1:]
		if exp != "" && (exp[0] == '+' || exp[0] == '-') {
			exp = exp[1:]
		}
		if _, ok := digitPart(exp); !ok {
			return 0, bad
		}
	}
	ip, fp, hasDot := strings.Cut(mant, ".")
	if ip == "" && fp == "" {
		return 0, bad
	}
	if ip != "" {
		if _, ok := digitPart(ip); !ok {
			return 0, bad
		}
	}
	if hasDot && fp != "" {
		if _, ok := digitPart(fp); !ok {
			return 0, bad
		}
	}
	f, err := strconv.ParseFloat(strings.ReplaceAll(t, "_", ""), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, bad
	}
	return f, nil
}

// notFloat is ParseFloat's error, formatted only when read.
type notFloat string

func (s notFloat) Error() string {
	return fmt.Sprintf("could not convert string to float: %q", string(s))
}

func errNotFloat(s string) error { return notFloat(s) }
