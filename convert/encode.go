package convert

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"
	"sort"
	"strconv"
	"strings"

	"github.com/sluicedata/sluice/convert/input"
	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/mds"
)

// fast identifies encodings the record builder writes without going
// through mds.Encoding.Append (the hot path of text inputs).
type fast uint8

const (
	fastNone fast = iota
	fastBytes
	fastStr
	fastInt
	fastFloat64
)

// column is one output column with its parsed encoding.
type column struct {
	name string
	enc  *mds.Encoding
	fast fast
	size int // fixed size, 0 if variable
	// nullDefault writes the encoding's zero value for a null (--nulls
	// default) instead of failing with errNull.
	nullDefault bool
	// image is "jpeg" or "png" for those columns, whose stored bytes are
	// checked (checkImageBytes).
	image string
}

// errNull is the failure of a null or missing value in a column that
// cannot hold one.
var errNull = errors.New("value is missing or null")

// layout is the column plan of the output: columns sorted by name, as MDS
// stores them.
type layout struct {
	cols  []column
	index map[string]int // name → position in cols
	nvar  int            // variable-size columns
}

func newLayout(cols []input.Column, nullDefault bool) (*layout, error) {
	if len(cols) == 0 {
		return nil, errors.New("convert: no columns")
	}
	sorted := append([]input.Column(nil), cols...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	l := &layout{index: make(map[string]int, len(cols))}
	for i, c := range sorted {
		if c.Name == "" {
			return nil, errors.New("convert: empty column name")
		}
		if _, dup := l.index[c.Name]; dup {
			return nil, fmt.Errorf("convert: column %q given twice", c.Name)
		}
		enc, err := mds.ParseEncoding(c.Encoding)
		if err != nil {
			return nil, fmt.Errorf("convert: column %q: %w", c.Name, err)
		}
		col := column{name: c.Name, enc: enc, size: enc.Size(), nullDefault: nullDefault}
		switch c.Encoding {
		case "bytes", "jpeg", "png":
			col.fast = fastBytes
			if c.Encoding != "bytes" {
				col.image = c.Encoding
			}
		case "str":
			col.fast = fastStr
		case "int", "int64":
			col.fast = fastInt
		case "float64":
			col.fast = fastFloat64
		}
		if col.size == 0 {
			l.nvar++
		}
		l.index[c.Name] = i
		l.cols = append(l.cols, col)
	}
	return l, nil
}

// names and encodings in index order.
func (l *layout) names() []string {
	out := make([]string, len(l.cols))
	for i, c := range l.cols {
		out[i] = c.name
	}
	return out
}

func (l *layout) encodings() []string {
	out := make([]string, len(l.cols))
	for i, c := range l.cols {
		out[i] = c.enc.String()
	}
	return out
}

func (l *layout) sizes() []int {
	out := make([]int, len(l.cols))
	for i, c := range l.cols {
		out[i] = c.size
	}
	return out
}

// appendRecord appends the MDS record of row (values aligned with l.cols)
// to dst: the u32 lengths of the variable-size columns, then every
// column's bytes (spec section 3.2).
func (l *layout) appendRecord(dst []byte, row []input.Value) ([]byte, error) {
	start := len(dst)
	head := start
	dst = append(dst, make([]byte, 4*l.nvar)...)
	for i := range l.cols {
		c := &l.cols[i]
		before := len(dst)
		var err error
		dst, err = c.appendValue(dst, &row[i])
		if err != nil {
			return dst[:start], fmt.Errorf("column %q: %w", c.name, err)
		}
		n := len(dst) - before
		if c.size > 0 {
			if n != c.size {
				return dst[:start], fmt.Errorf("column %q: %s value encodes to %d bytes, want %d", c.name, c.enc, n, c.size)
			}
			continue
		}
		if uint64(n) > math.MaxUint32 {
			return dst[:start], fmt.Errorf("column %q: value of %d bytes exceeds 4 GiB", c.name, n)
		}
		binary.LittleEndian.PutUint32(dst[head:], uint32(n))
		head += 4
	}
	return dst, nil
}

func (c *column) appendValue(dst []byte, v *input.Value) ([]byte, error) {
	if v.Kind == input.Bytes {
		if c.image != "" {
			if err := checkImageBytes(v.Bytes, c.image); err != nil {
				return dst, err
			}
		}
		return append(dst, v.Bytes...), nil // pass-through, as MosaicML does
	}
	if v.Kind == input.NDArray {
		return c.appendArray(dst, v)
	}
	switch c.fast {
	case fastBytes:
		if v.Kind == input.String || v.Kind == input.Text {
			return append(dst, v.Bytes...), nil
		}
	case fastStr:
		if v.Kind == input.String || v.Kind == input.Text {
			return append(dst, v.Bytes...), nil
		}
	case fastInt:
		switch v.Kind {
		case input.Int, input.Bool:
			return binary.LittleEndian.AppendUint64(dst, uint64(v.Int)), nil
		case input.Text, input.String:
			n, err := strconv.ParseInt(strings.TrimSpace(string(v.Bytes)), 10, 64)
			if err != nil {
				return dst, fmt.Errorf("%q is not a 64-bit integer", v.Bytes)
			}
			return binary.LittleEndian.AppendUint64(dst, uint64(n)), nil
		}
	case fastFloat64:
		switch v.Kind {
		case input.Float:
			return binary.LittleEndian.AppendUint64(dst, math.Float64bits(v.Float)), nil
		case input.Int:
			return binary.LittleEndian.AppendUint64(dst, math.Float64bits(float64(v.Int))), nil
		}
	}
	if v.Kind == input.Null {
		if c.enc.String() == "json" {
			return append(dst, "null"...), nil
		}
		if c.nullDefault {
			return c.appendDefault(dst)
		}
		return dst, errNull
	}
	gv, err := goValue(c.enc.String(), v)
	if err != nil {
		return dst, err
	}
	return c.enc.Append(dst, gv)
}

// goValue converts an input value to the Go value mds.Encoding.Append
// expects for enc.
func goValue(enc string, v *input.Value) (any, error) {
	switch v.Kind {
	case input.Bool:
		if enc == "json" {
			return v.Int != 0, nil
		}
		return v.Int, nil
	case input.Int:
		if enc == "str" {
			return strconv.FormatInt(v.Int, 10), nil
		}
		return v.Int, nil
	case input.Float:
		if enc == "str" {
			return format.FormatPyFloat(v.Float), nil
		}
		if isIntEncoding(enc) {
			if v.Float != math.Trunc(v.Float) || math.Abs(v.Float) > 1<<63 {
				return nil, fmt.Errorf("%v is not an integer", v.Float)
			}
			return int64(v.Float), nil
		}
		return v.Float, nil
	case input.String, input.Text:
		s := string(v.Bytes)
		switch {
		case isIntEncoding(enc) || enc == "str_int":
			t := strings.TrimSpace(s)
			if n, err := strconv.ParseInt(t, 10, 64); err == nil {
				return n, nil
			}
			b, ok := new(big.Int).SetString(t, 10)
			if !ok {
				return nil, fmt.Errorf("%q is not an integer", s)
			}
			return b, nil
		case strings.HasPrefix(enc, "float") || enc == "str_float":
			f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
			if err != nil {
				return nil, fmt.Errorf("%q is not a number", s)
			}
			return f, nil
		case enc == "json" && v.Kind == input.Text:
			// Untyped text (a CSV cell) that holds JSON is kept as JSON.
			if _, err := format.ParseJSON(v.Bytes); err == nil {
				return format.JSON(v.Bytes), nil
			}
			return s, nil
		}
		return s, nil
	case input.JSON:
		return format.JSON(v.Bytes), nil
	}
	return nil, fmt.Errorf("cannot encode a %s value as %s", v.Kind, enc)
}

func isIntEncoding(enc string) bool {
	switch enc {
	case "int", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64":
		return true
	}
	return false
}

// ParseColumns parses a --columns flag value: "name:encoding,..." where an
// encoding may itself contain ':' and ',' only as ndarray parameters
// ("emb:ndarray:float32:4,8" is one column). A name without an encoding
// leaves the encoding to inference.
func ParseColumns(s string) ([]input.Column, error) {
	var out []input.Column
	parts := strings.Split(s, ",")
	for i := 0; i < len(parts); i++ {
		p := strings.TrimSpace(parts[i])
		if p == "" {
			continue
		}
		name, enc, _ := strings.Cut(p, ":")
		if strings.HasPrefix(enc, "ndarray:") && strings.Count(enc, ":") == 2 {
			// Shape dims were split on ','; glue back the numeric pieces.
			for i+1 < len(parts) && isDigits(strings.TrimSpace(parts[i+1])) {
				enc += "," + strings.TrimSpace(parts[i+1])
				i++
			}
		}
		if name == "" {
			return nil, fmt.Errorf("convert: bad column spec %q: want name:encoding", p)
		}
		out = append(out, input.Column{Name: name, Encoding: enc})
	}
	if len(out) == 0 {
		return nil, errors.New("convert: empty column list")
	}
	return out, nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
