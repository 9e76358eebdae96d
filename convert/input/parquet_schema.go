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

	// Nested fields: a schema holding only this field, for reassembly.
	sub *parquet.Schema
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
				// Walk the chain from the field down to the leaf, counting
				// the definition levels of its optional and repeated nodes.
				def := 0
				n := c
				for {
					if n.Optional() {
						def++
					}
					if n.Repeated() {
						def++
						pf.elemDef = def
					}
					if n == c && !n.Repeated() {
						pf.listDef = def
					}
					if n.Leaf() || len(n.Columns()) != 1 {
						break
					}
					n = n.Columns()[0]
				}
				if n == leaf && pf.elemDef > 0 {
					pf.kind, pf.dtype, pf.size = pqNumList, dt, size
					return pf
				}
			}
		}
	}
	pf.kind = pqNested
	pf.sub = parquet.NewSchema("row", parquet.Group{f.Name(): f})
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
