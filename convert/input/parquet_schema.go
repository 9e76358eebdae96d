package input

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"
)

// pqKind says how a top-level Parquet field is read.
type pqKind uint8

const (
	pqFlat    pqKind = iota // one leaf, not repeated: a scalar per row
	pqNumList               // one leaf of numbers repeated once: an NDArray per row
	pqNested                // anything else (structs, maps, lists of strings, nested lists): JSON
)

// pqField is the read plan of one projected top-level field.
type pqField struct {
	name   string
	kind   pqKind
	leaves []int // leaf column indices in row-group order
	maxDef int   // of the single leaf (flat, list)
	str    bool  // flat byte array holding UTF-8 text

	// Lists of numbers: definition levels at which the list is present
	// (not null) and at which it has an element; the element dtype.
	listDef, elemDef int
	dtype            string
	size             int // bytes per element

	// Nested fields: a schema holding only this field, for reassembly,
	// or a render tree when nothing under the field repeats.
	sub  *parquet.Schema
	tree *jsonNode
	// scalarList: a list of non-numbers (listDef, elemDef, maxDef and str
	// apply), rendered directly.
	scalarList bool
}

// listLevels walks the single chain from the list field c down to leaf and
// returns the definition levels at which the list is present and has an
// element (0, 0 when the chain is not a simple list).
func listLevels(c, leaf *parquet.Column) (listDef, elemDef int) {
	def := 0
	n := c
	for {
		if n.Optional() {
			def++
		}
		if n.Repeated() {
			def++
			elemDef = def
		}
		if n == c && !n.Repeated() {
			listDef = def
		}
		if n.Leaf() || len(n.Columns()) != 1 {
			break
		}
		n = n.Columns()[0]
	}
	if n != leaf {
		return 0, 0
	}
	return listDef, elemDef
}

// parquetFile reads the projected columns of one Parquet file, a row
// group at a time, each column with the library's columnar page reader.
type parquetFile struct {
	name   string
	f      *os.File
	tmp    string // downloaded copy to remove, "" for local files
	pf     *parquet.File
	fields []pqField
	groups []parquet.RowGroup

	g       int      // next row group to hand out
	pending *pqFetch // the row group being read ahead
	cur     *pqGroup
	curRow  int
	base    int64 // rows of the file before cur
}

func collectLeaves(c *parquet.Column, out []*parquet.Column) []*parquet.Column {
	if c.Leaf() {
		return append(out, c)
	}
	for _, cc := range c.Columns() {
		out = collectLeaves(cc, out)
	}
	return out
}

func numDType(k parquet.Kind) (string, int) {
	switch k {
	case parquet.Boolean:
		return "uint8", 1
	case parquet.Int32:
		return "int32", 4
	case parquet.Int64:
		return "int64", 8
	case parquet.Float:
		return "float32", 4
	case parquet.Double:
		return "float64", 8
	}
	return "", 0
}

// planField works out how to read the top-level column c (field f).
func planField(c *parquet.Column, f parquet.Field) pqField {
	leaves := collectLeaves(c, nil)
	pf := pqField{name: c.Name()}
	for _, l := range leaves {
		pf.leaves = append(pf.leaves, l.Index())
	}
	if len(leaves) == 1 {
		leaf := leaves[0]
		pf.maxDef = leaf.MaxDefinitionLevel()
		switch leaf.MaxRepetitionLevel() {
		case 0:
			if c.Leaf() {
				pf.kind = pqFlat
				pf.str = isString(leaf)
				return pf
			}
		case 1:
			if dt, size := numDType(leaf.Type().Kind()); dt != "" {
				if lv, ev := listLevels(c, leaf); ev > 0 {
					pf.kind, pf.dtype, pf.size, pf.listDef, pf.elemDef = pqNumList, dt, size, lv, ev
					return pf
				}
			} else if lv, ev := listLevels(c, leaf); ev > 0 {
				// A list of strings or binary: json, rendered directly.
				pf.kind, pf.listDef, pf.elemDef, pf.scalarList, pf.str = pqNested, lv, ev, true, isString(leaf)
				return pf
			}
		}
	}
	pf.kind = pqNested
	leaf := 0
	if pf.tree = planJSON(c, 0, &leaf); pf.tree == nil {
		pf.sub = parquet.NewSchema("row", parquet.Group{f.Name(): f})
	}
	return pf
}

func (pf *pqField) encoding(f parquet.Node) string {
	switch pf.kind {
	case pqNumList:
		return "ndarray:" + pf.dtype
	case pqNested:
		return "json"
	}
	return parquetEncoding(f)
}

func isString(n parquet.Node) bool {
	t := n.Type()
	if t.Kind() != parquet.ByteArray {
		return false
	}
	if ct := t.ConvertedType(); ct != nil && *ct == deprecated.UTF8 {
		return true
	}
	if lt := t.LogicalType(); lt != nil {
		s := strings.ToUpper(lt.String())
		return strings.Contains(s, "STRING") || strings.Contains(s, "JSON") || strings.Contains(s, "ENUM")
	}
	return false
}

func parquetEncoding(n parquet.Node) string {
	switch n.Type().Kind() {
	case parquet.Boolean:
		return "uint8"
	case parquet.Int32, parquet.Int64:
		return "int"
	case parquet.Float:
		return "float32"
	case parquet.Double:
		return "float64"
	case parquet.ByteArray:
		if isString(n) {
			return "str"
		}
	}
	return "bytes"
}

// openParquetFile opens a Parquet file and plans the reading of the
// columns named in want (every column when want is empty).
func openParquetFile(ctx context.Context, l location, tempDir string, want []string) (_ fileReader, err error) {
	defer recoverParquet(l.name, &err)
	f, tmp, err := openLocal(ctx, l, tempDir)
	if err != nil {
		return nil, err
	}
	p := &parquetFile{name: l.name, f: f, tmp: tmp}
	fail := func(err error) (fileReader, error) {
		return nil, errors.Join(err, p.close())
	}
	st, err := f.Stat()
	if err != nil {
		return fail(fmt.Errorf("input: %w", err))
	}
	if err := checkParquetFooter(l.name, f, st.Size()); err != nil {
		return fail(err)
	}
	p.pf, err = parquet.OpenFile(f, st.Size(), parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		return fail(fmt.Errorf("input: %s: not a readable Parquet file: %w", l.name, err))
	}
	if err := checkParquetLayout(l.name, p.pf, st.Size()); err != nil {
		return fail(err)
	}
	fields := p.pf.Schema().Fields()
	cols := p.pf.Root().Columns()
	if len(fields) != len(cols) {
		return fail(fmt.Errorf("input: %s: schema has %d fields but %d columns", l.name, len(fields), len(cols)))
	}
	for i, c := range cols {
		if len(want) > 0 && !slices.Contains(want, c.Name()) {
			continue // not read at all
		}
		p.fields = append(p.fields, planField(c, fields[i]))
	}
	p.groups = p.pf.RowGroups()
	return p, nil
}

func parquetColumns(ctx context.Context, l location, tempDir string) (_ []Column, err error) {
	defer recoverParquet(l.name, &err)
	fr, err := openParquetFile(ctx, l, tempDir, nil)
	if err != nil {
		return nil, err
	}
	defer fr.close()
	p := fr.(*parquetFile)
	fields := p.pf.Schema().Fields()
	cols := make([]Column, len(p.fields))
	for i := range p.fields {
		cols[i] = Column{Name: p.fields[i].name, Encoding: p.fields[i].encoding(fields[i])}
	}
	return cols, nil
}
