package input

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"

	"github.com/parquet-go/parquet-go"
	"golang.org/x/sync/errgroup"
)

// maxPrealloc bounds the values preallocated from a column chunk's
// declared count (metadata is untrusted; the slice still grows to the
// real count).
const maxPrealloc = 1 << 20

// pqGroup is one row group's projected columns, read whole.
type pqGroup struct {
	rows   int
	fields []pqField
	cols   []pqCol // aligned with fields
}

// pqCol is the data of one projected field.
type pqCol struct {
	// flat: one value per row.
	vals []parquet.Value
	// list of numbers: elements of row r are data[off[r]*size:off[r+1]*size];
	// state[r] is 0 (present), 1 (null list) or 2 (a null element).
	off   []int32
	data  []byte
	state []uint8
	// nested: per leaf, its values and the first value of each row.
	leafVals  [][]parquet.Value
	leafStart [][]int32
}

// pqFetch is a row group being read in the background.
type pqFetch struct {
	done chan struct{}
	g    *pqGroup
	err  error
}

func (p *parquetFile) startFetch(ctx context.Context) {
	if p.g >= len(p.groups) {
		p.pending = nil
		return
	}
	rg := p.groups[p.g]
	p.g++
	fe := &pqFetch{done: make(chan struct{})}
	p.pending = fe
	go func() {
		defer close(fe.done)
		fe.g, fe.err = readGroup(ctx, p.name, rg, p.fields)
	}()
}

// readGroup reads the projected columns of rg, one goroutine per column.
func readGroup(ctx context.Context, name string, rg parquet.RowGroup, fields []pqField) (_ *pqGroup, err error) {
	defer recoverParquet(name, &err)
	g := &pqGroup{rows: int(rg.NumRows()), fields: fields, cols: make([]pqCol, len(fields))}
	chunks := rg.ColumnChunks()
	eg, ctx := errgroup.WithContext(ctx)
	eg.SetLimit(runtime.GOMAXPROCS(0))
	for i := range fields {
		f := &fields[i]
		for _, leaf := range f.leaves {
			if leaf < 0 || leaf >= len(chunks) {
				return nil, fmt.Errorf("input: %s: column %q has no chunk %d", name, f.name, leaf)
			}
		}
		eg.Go(func() (err error) {
			defer recoverParquet(name, &err)
			return g.readField(ctx, name, i, chunks)
		})
	}
	if err := eg.Wait(); err != nil {
		return nil, err
	}
	return g, nil
}

func (g *pqGroup) readField(ctx context.Context, name string, i int, chunks []parquet.ColumnChunk) error {
	f := &g.fields[i]
	c := &g.cols[i]
	switch f.kind {
	case pqFlat:
		vals, err := readChunk(ctx, chunks[f.leaves[0]])
		if err != nil {
			return fmt.Errorf("input: %s: column %q: %w", name, f.name, err)
		}
		if len(vals) != g.rows {
			return fmt.Errorf("input: %s: column %q has %d values for %d rows", name, f.name, len(vals), g.rows)
		}
		c.vals = vals
	case pqNumList:
		vals, err := readChunk(ctx, chunks[f.leaves[0]])
		if err != nil {
			return fmt.Errorf("input: %s: column %q: %w", name, f.name, err)
		}
		return g.packList(name, f, c, vals)
	case pqNested:
		c.leafVals = make([][]parquet.Value, len(f.leaves))
		c.leafStart = make([][]int32, len(f.leaves))
		for j, leaf := range f.leaves {
			vals, err := readChunk(ctx, chunks[leaf])
			if err != nil {
				return fmt.Errorf("input: %s: column %q: %w", name, f.name, err)
			}
			starts, err := rowStarts(vals, g.rows)
			if err != nil {
				return fmt.Errorf("input: %s: column %q: %w", name, f.name, err)
			}
			c.leafVals[j], c.leafStart[j] = vals, starts
		}
	}
	return nil
}

// rowStarts returns the index of each row's first value (a value with
// repetition level 0 starts a row) plus the end.
func rowStarts(vals []parquet.Value, rows int) ([]int32, error) {
	if len(vals) > math.MaxInt32 {
		return nil, errors.New("too many values in one row group")
	}
	starts := make([]int32, 0, rows+1)
	for i := range vals {
		if vals[i].RepetitionLevel() == 0 {
			starts = append(starts, int32(i))
		}
	}
	if len(starts) != rows {
		return nil, fmt.Errorf("%d rows of values in a row group of %d rows", len(starts), rows)
	}
	return append(starts, int32(len(vals))), nil
}

// packList turns a list column's values into packed elements per row.
func (g *pqGroup) packList(name string, f *pqField, c *pqCol, vals []parquet.Value) error {
	starts, err := rowStarts(vals, g.rows)
	if err != nil {
		return fmt.Errorf("input: %s: column %q: %w", name, f.name, err)
	}
	c.off = make([]int32, g.rows+1)
	c.state = make([]uint8, g.rows)
	c.data = make([]byte, 0, min(len(vals), maxPrealloc)*f.size)
	le := binary.LittleEndian
	n := int32(0)
	for r := range g.rows {
		c.off[r] = n
		row := vals[starts[r]:starts[r+1]]
		switch {
		case row[0].DefinitionLevel() < f.listDef:
			c.state[r] = 1 // null list
			continue
		case row[0].DefinitionLevel() < f.elemDef:
			continue // empty list
		}
		for _, v := range row {
			if v.DefinitionLevel() < f.maxDef {
				c.state[r] = 2 // a null element
				continue
			}
			switch v.Kind() {
			case parquet.Boolean:
				b := byte(0)
				if v.Boolean() {
					b = 1
				}
				c.data = append(c.data, b)
			case parquet.Int32:
				c.data = le.AppendUint32(c.data, uint32(v.Int32()))
			case parquet.Int64:
				c.data = le.AppendUint64(c.data, uint64(v.Int64()))
			case parquet.Float:
				c.data = le.AppendUint32(c.data, math.Float32bits(v.Float()))
			case parquet.Double:
				c.data = le.AppendUint64(c.data, math.Float64bits(v.Double()))
			default:
				return fmt.Errorf("input: %s: column %q: element of kind %s in a list of %s", name, f.name, v.Kind(), f.dtype)
			}
			n++
		}
	}
	c.off[g.rows] = n
	if int(n)*f.size != len(c.data) {
		return fmt.Errorf("input: %s: column %q: list data does not add up", name, f.name)
	}
	return nil
}

// readChunk reads every value of a column chunk through its pages. Byte
// arrays are copied out of the page buffers, which the library may reuse.
func readChunk(ctx context.Context, cc parquet.ColumnChunk) ([]parquet.Value, error) {
	pages := cc.Pages()
	defer pages.Close()
	vals := make([]parquet.Value, 0, min(max(cc.NumValues(), 0), maxPrealloc))
	buf := make([]parquet.Value, 4096)
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		page, err := pages.ReadPage()
		if err == io.EOF {
			return vals, nil
		}
		if err != nil {
			return nil, err
		}
		r := page.Values()
		for {
			n, err := r.ReadValues(buf)
			for _, v := range buf[:n] {
				if k := v.Kind(); k == parquet.ByteArray || k == parquet.FixedLenByteArray {
					v = v.Clone()
				}
				vals = append(vals, v)
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				parquet.Release(page)
				return nil, err
			}
		}
		parquet.Release(page)
	}
}

func (p *parquetFile) read(ctx context.Context, dst []Item, max int) (_ []Item, err error) {
	defer recoverParquet(p.name, &err)
	if err := ctx.Err(); err != nil {
		return dst, err
	}
	for p.cur == nil || p.curRow >= p.cur.rows {
		if p.cur != nil {
			p.base += int64(p.cur.rows)
			p.cur = nil
		}
		if p.pending == nil && p.g == 0 {
			p.startFetch(ctx)
		}
		fe := p.pending
		if fe == nil {
			return dst, io.EOF
		}
		select {
		case <-fe.done:
		case <-ctx.Done():
			return dst, ctx.Err()
		}
		if fe.err != nil {
			return dst, fe.err
		}
		p.cur, p.curRow = fe.g, 0
		p.startFetch(ctx) // read the next row group while this one is decoded
	}
	for n := 0; n < max && p.curRow < p.cur.rows; n++ {
		dst = append(dst, Item{File: p.name, Pos: p.base + int64(p.curRow) + 1, Label: int64(p.curRow), Aux: p.cur})
		p.curRow++
	}
	return dst, nil
}

func (p *parquetFile) close() error {
	if fe := p.pending; fe != nil {
		<-fe.done // the reader goroutine uses the file
		p.pending = nil
	}
	var errs []error
	if p.f != nil {
		errs = append(errs, p.f.Close())
		p.f = nil
	}
	if p.tmp != "" {
		errs = append(errs, os.Remove(p.tmp))
		p.tmp = ""
	}
	return errors.Join(errs...)
}

func scalarValue(v parquet.Value, str bool) Value {
	switch {
	case v.IsNull():
		return Value{Kind: Null}
	case v.Kind() == parquet.Boolean:
		out := Value{Kind: Bool}
		if v.Boolean() {
			out.Int = 1
		}
		return out
	case v.Kind() == parquet.Int32:
		return Value{Kind: Int, Int: int64(v.Int32())}
	case v.Kind() == parquet.Int64:
		return Value{Kind: Int, Int: v.Int64()}
	case v.Kind() == parquet.Float:
		return Value{Kind: Float, Float: float64(v.Float())}
	case v.Kind() == parquet.Double:
		return Value{Kind: Float, Float: v.Double()}
	case str:
		return Value{Kind: String, Bytes: v.ByteArray()}
	}
	return Value{Kind: Bytes, Bytes: v.ByteArray()}
}

// ErrNullElement is matched by the error for a list of numbers holding a
// null element (an ndarray cannot hold one).
var ErrNullElement = errors.New("list holds a null element")

func decodeParquet(_ context.Context, it *Item, fn FieldFunc) (err error) {
	defer recoverParquet(it.File, &err)
	g, ok := it.Aux.(*pqGroup)
	r := int(it.Label)
	if !ok || r < 0 || r >= g.rows {
		return fmt.Errorf("input: %s: not a Parquet row", it.Loc())
	}
	for i := range g.fields {
		f := &g.fields[i]
		c := &g.cols[i]
		var out Value
		switch f.kind {
		case pqFlat:
			out = scalarValue(c.vals[r], f.str)
		case pqNumList:
			switch c.state[r] {
			case 1:
				out = Value{Kind: Null}
			case 2:
				return fmt.Errorf("input: %s: column %q: %w", it.Loc(), f.name, ErrNullElement)
			default:
				out = NDArrayValue(f.dtype, c.data[int(c.off[r])*f.size:int(c.off[r+1])*f.size])
			}
		case pqNested:
			out, err = nestedValue(f, c, r)
			if err != nil {
				return fmt.Errorf("input: %s: column %q: %w", it.Loc(), f.name, err)
			}
		}
		if err := fn([]byte(f.name), out); err != nil {
			return err
		}
	}
	return nil
}

// nestedValue reassembles row r of a nested field with the library's
// reconstruction and renders it as JSON.
func nestedValue(f *pqField, c *pqCol, r int) (Value, error) {
	if f.scalarList {
		vals := c.leafVals[0][c.leafStart[0][r]:c.leafStart[0][r+1]]
		switch {
		case vals[0].DefinitionLevel() < f.listDef:
			return Value{Kind: Null}, nil
		case vals[0].DefinitionLevel() < f.elemDef:
			return Value{Kind: JSON, Bytes: []byte("[]")}, nil
		}
		b := []byte{'['}
		for i, v := range vals {
			if i > 0 {
				b = append(b, ',')
			}
			if v.DefinitionLevel() < f.maxDef {
				b = append(b, "null"...)
			} else {
				b = appendScalarJSON(b, v, f.str)
			}
		}
		return Value{Kind: JSON, Bytes: append(b, ']')}, nil
	}
	if f.tree != nil {
		b := f.tree.appendJSON(nil, c, r)
		if string(b) == "null" {
			return Value{Kind: Null}, nil
		}
		return Value{Kind: JSON, Bytes: b}, nil
	}
	var row parquet.Row
	for j := range f.leaves {
		for _, v := range c.leafVals[j][c.leafStart[j][r]:c.leafStart[j][r+1]] {
			row = append(row, v.Level(v.RepetitionLevel(), v.DefinitionLevel(), j))
		}
	}
	var x any
	if err := f.sub.Reconstruct(&x, row); err != nil {
		return Value{}, err
	}
	m, ok := x.(map[string]any)
	if !ok {
		return Value{}, fmt.Errorf("reassembled %T, want an object", x)
	}
	v := m[f.name]
	if v == nil {
		return Value{Kind: Null}, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return Value{}, err
	}
	return Value{Kind: JSON, Bytes: b}, nil
}
