package convert

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/sluicedata/sluice/convert/input"
)

// kindSet records which kinds of values a column held in the rows that
// inference looked at.
type kindSet struct {
	n                                               int
	null, boolean, integer, float, str, bytes, json int
	text, textInt, textFloat                        int
}

func (k *kindSet) add(v *input.Value) {
	k.n++
	switch v.Kind {
	case input.Null:
		k.null++
	case input.Bool:
		k.boolean++
	case input.Int:
		k.integer++
	case input.Float:
		k.float++
	case input.String:
		k.str++
	case input.Bytes:
		k.bytes++
	case input.JSON:
		k.json++
	case input.Text:
		k.text++
		t := strings.TrimSpace(string(v.Bytes))
		if _, err := strconv.ParseInt(t, 10, 64); err == nil {
			k.textInt++
		} else if _, err := strconv.ParseFloat(t, 64); err == nil {
			k.textFloat++
		}
	}
}

// encoding picks the MDS encoding for a column whose values had the kinds
// in k, in rows rows (a column missing from some rows is treated as null).
func (k *kindSet) encoding(rows int) string {
	missing := rows - k.n + k.null
	switch {
	case missing > 0 || k.json > 0:
		return "json"
	case k.bytes == k.n:
		return "bytes"
	case k.str == k.n:
		return "str"
	case k.integer+k.boolean == k.n:
		return "int"
	case k.integer+k.float == k.n:
		return "float64"
	case k.text == k.n:
		switch {
		case k.textInt == k.n:
			return "int"
		case k.textInt+k.textFloat == k.n:
			return "float64"
		}
		return "str"
	}
	return "json"
}

// inferColumns decodes up to rows items of src and derives the columns:
// every field seen, in first-seen order, with an encoding that fits all
// the values seen. Columns whose encoding is already known keep it.
func inferColumns(ctx context.Context, src input.Source, known []input.Column, rows int, skipInvalid bool) ([]input.Column, error) {
	kinds := map[string]*kindSet{}
	var order []string
	for _, c := range known {
		order = append(order, c.Name)
		kinds[c.Name] = &kindSet{}
	}
	seen, read := 0, 0
	var items []input.Item
	for read < rows {
		var err error
		items, err = src.Read(ctx, items[:0], min(256, rows-read))
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		for i := range items {
			decoded := true
			err := src.Decode(ctx, &items[i], func(name []byte, v input.Value) error {
				k, ok := kinds[string(name)]
				if !ok {
					k = &kindSet{}
					kinds[string(name)] = k
					order = append(order, string(name))
				}
				k.add(&v)
				return nil
			})
			if err != nil {
				if !skipInvalid {
					return nil, err
				}
				decoded = false
			}
			if decoded {
				seen++
			}
		}
		read += len(items)
	}
	if seen == 0 {
		return nil, errors.New("convert: the input has no records to infer columns from; give --columns")
	}
	enc := map[string]string{}
	for _, c := range known {
		enc[c.Name] = c.Encoding
	}
	out := make([]input.Column, 0, len(order))
	for _, name := range order {
		e := enc[name]
		if e == "" {
			e = kinds[name].encoding(seen)
		}
		out = append(out, input.Column{Name: name, Encoding: e})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("convert: the first %d records have no fields", seen)
	}
	return out, nil
}
