package jsonl

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/big"
	"sort"
	"strconv"
	"unicode/utf8"

	"github.com/sluicedata/sluice/format"
)

// Format is the index.json "format" value of JSON-lines shards.
const Format = "json"

// maxIntDigits is Python's default limit on the digits int() parses
// (sys.int_max_str_digits); longer integers fail there too, and the bound
// keeps hostile records from costing quadratic time.
const maxIntDigits = 4300

type kind uint8

const (
	kStr kind = iota
	kInt
	kFloat
)

func parseKind(enc string) (kind, error) {
	switch enc {
	case "str":
		return kStr, nil
	case "int":
		return kInt, nil
	case "float":
		return kFloat, nil
	}
	return 0, fmt.Errorf("unsupported encoding %q (json columns are str, int or float)", enc)
}

// Schema is the column set and record terminator of a JSON-lines dataset.
// It encodes samples to records and decodes records to samples, without
// I/O. A Schema is immutable and safe for concurrent use.
type Schema struct {
	names   []string // sorted
	kinds   []kind
	columns map[string]string
	newline string
	bad     error // set for a Schema read from an index with unknown encodings
}

// NewSchema validates columns (name → "str", "int" or "float") and
// returns the Schema. newline terminates every record; "" means "\n",
// MosaicML's default.
func NewSchema(columns map[string]string, newline string) (*Schema, error) {
	if newline == "" {
		newline = "\n"
	}
	if !utf8.ValidString(newline) {
		return nil, errors.New("jsonl: newline is not valid UTF-8")
	}
	s := &Schema{columns: make(map[string]string, len(columns)), newline: newline}
	for name, enc := range columns {
		if !utf8.ValidString(name) {
			return nil, fmt.Errorf("jsonl: column name %q is not valid UTF-8", name)
		}
		s.names = append(s.names, name)
		s.columns[name] = enc
	}
	sort.Strings(s.names)
	for _, name := range s.names {
		k, err := parseKind(columns[name])
		if err != nil {
			return nil, fmt.Errorf("jsonl: column %q: %w", name, err)
		}
		s.kinds = append(s.kinds, k)
	}
	return s, nil
}

// schemaOf builds the Schema of an index entry without validating the
// encodings: MosaicML's reader does not check records against them.
func schemaOf(info *format.ShardInfo) *Schema {
	nl := info.Newline
	s := &Schema{columns: info.Columns, newline: nl}
	for name := range info.Columns {
		s.names = append(s.names, name)
	}
	sort.Strings(s.names)
	for _, name := range s.names {
		k, err := parseKind(info.Columns[name])
		if err != nil && s.bad == nil {
			s.bad = fmt.Errorf("jsonl: column %q: %w", name, err)
		}
		s.kinds = append(s.kinds, k)
	}
	return s
}

// Columns returns the column encodings by name. The map must not be
// modified.
func (s *Schema) Columns() map[string]string { return s.columns }

// Names returns the column names, sorted. The slice must not be modified.
func (s *Schema) Names() []string { return s.names }

// Newline returns the record terminator.
func (s *Schema) Newline() string { return s.newline }

// AppendRecord appends sample's record to dst, byte for byte what
// MosaicML's JSONWriter writes: the object of the declared columns only,
// keys sorted, in Python's json.dumps(sort_keys=True) text (", " and ": "
// separators, ASCII-only escaping, float repr, NaN and Infinity tokens),
// then the newline. Other keys of sample are ignored.
//
// Accepted values: str columns take a string (valid UTF-8); int columns
// any Go integer type, *big.Int, or a bool (written true/false, as
// Python's bool passes its int check); float columns a float64 or
// float32 (an integer is refused, as in MosaicML).
func (s *Schema) AppendRecord(dst []byte, sample format.Sample) ([]byte, error) {
	if s.bad != nil {
		return dst, s.bad
	}
	dst = append(dst, '{')
	for i, name := range s.names {
		v, ok := sample[name]
		if !ok {
			return dst, fmt.Errorf("jsonl: sample has no column %q", name)
		}
		if i > 0 {
			dst = append(dst, ", "...)
		}
		dst = format.AppendJSONString(dst, name)
		dst = append(dst, ": "...)
		var err error
		if dst, err = appendValue(dst, s.kinds[i], v); err != nil {
			return dst, fmt.Errorf("jsonl: column %q: %w", name, err)
		}
	}
	dst = append(dst, '}')
	return append(dst, s.newline...), nil
}

func appendValue(dst []byte, k kind, v any) ([]byte, error) {
	switch k {
	case kStr:
		if s, ok := v.(string); ok {
			if !utf8.ValidString(s) {
				return dst, errors.New("string is not valid UTF-8")
			}
			return format.AppendJSONString(dst, s), nil
		}
	case kInt:
		switch x := v.(type) {
		case bool:
			if x {
				return append(dst, "true"...), nil
			}
			return append(dst, "false"...), nil
		case *big.Int:
			if x == nil {
				return dst, errors.New("nil *big.Int")
			}
			return x.Append(dst, 10), nil
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
		}
	case kFloat:
		switch x := v.(type) {
		case float64:
			return format.AppendJSONFloat(dst, x), nil
		case float32:
			return format.AppendJSONFloat(dst, float64(x)), nil
		}
	}
	return dst, fmt.Errorf("value of type %T does not fit encoding %s", v, [...]string{"str", "int", "float"}[k])
}

// Decode parses a record as MosaicML's JSONReader does: the JSON object,
// whole, without checking it against the columns. A trailing newline is
// removed first. Top-level values become string, bool, nil, int64 (or
// *big.Int beyond 64 bits) and float64 (including NaN and ±Inf); nested
// arrays and objects are []any and *format.JSONObject as
// format.ParseJSON returns them. Errors match format.ErrCorrupt.
func (s *Schema) Decode(rec []byte) (format.Sample, error) {
	out := format.Sample{}
	if err := s.DecodeInto(rec, out); err != nil {
		return nil, err
	}
	return out, nil
}

// DecodeInto is Decode into an existing Sample.
func (s *Schema) DecodeInto(rec []byte, out format.Sample) error {
	if s.newline != "" {
		rec = bytes.TrimSuffix(rec, []byte(s.newline))
	}
	if !utf8.Valid(rec) {
		return format.Corruptf("", "record is not valid UTF-8")
	}
	if decodeFlat(rec, out) {
		return nil
	}
	return decodeGeneral(rec, out)
}

// decodeGeneral decodes any record through format.ParseJSON.
func decodeGeneral(rec []byte, out format.Sample) error {
	v, err := format.ParseJSON(rec)
	if err != nil {
		ce := format.Corruptf("", "bad json record")
		ce.Err = err
		return ce
	}
	obj, ok := v.(*format.JSONObject)
	if !ok {
		return format.Corruptf("", "record is a JSON %s, not an object", jsonKind(v))
	}
	for _, k := range obj.Keys {
		x := obj.Values[k]
		if n, ok := x.(format.JSONNumber); ok {
			if x, err = number(n); err != nil {
				ce := format.Corruptf("", "key %q", k)
				ce.Err = err
				return ce
			}
		}
		out[k] = x
	}
	return nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case []any:
		return "array"
	case string:
		return "string"
	case format.JSONNumber:
		return "number"
	case bool:
		return "boolean"
	}
	return "null"
}

// number converts a JSON number as Python's json module types it.
func number(n format.JSONNumber) (any, error) {
	s := string(n)
	switch s {
	case "NaN":
		return math.NaN(), nil
	case "Infinity":
		return math.Inf(1), nil
	case "-Infinity":
		return math.Inf(-1), nil
	}
	isInt := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '.' || c == 'e' || c == 'E' {
			isInt = false
			break
		}
	}
	if isInt {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return i, nil
		}
		if len(s) > maxIntDigits+1 {
			return nil, fmt.Errorf("integer of %d digits exceeds Python's limit of %d", len(s), maxIntDigits)
		}
		b, ok := new(big.Int).SetString(s, 10)
		if !ok {
			return nil, fmt.Errorf("bad integer %q", s)
		}
		return b, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		var ne *strconv.NumError
		if !errors.As(err, &ne) || ne.Err != strconv.ErrRange {
			return nil, fmt.Errorf("bad number %q", s)
		}
	}
	return f, nil
}
