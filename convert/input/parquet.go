package input

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"

	"github.com/sluicedata/sluice/storage"
)

// parquetFile reads the rows of one Parquet file with a flat schema.
type parquetFile struct {
	name   string
	f      *os.File
	tmp    string // downloaded copy to remove, "" for local files
	pf     *parquet.File
	names  []string
	str    []bool // column holds UTF-8 strings
	groups []parquet.RowGroup
	g      int
	rows   parquet.Rows
	row    int64
	buf    []parquet.Row
}

// openLocal opens the file at l: directly for local paths, otherwise as a
// downloaded temporary copy (Parquet needs random access).
func openLocal(ctx context.Context, l location, tempDir string) (f *os.File, tmp string, err error) {
	if !strings.Contains(l.name, "://") {
		f, err := os.Open(l.name)
		if err != nil {
			return nil, "", fmt.Errorf("input: %w", err)
		}
		return f, "", nil
	}
	if tempDir == "" {
		tempDir = os.TempDir()
	}
	tmp = filepath.Join(tempDir, fmt.Sprintf("sluice-input-%d-%s", os.Getpid(), filepath.Base(l.key)))
	if _, err := storage.Download(ctx, l.b, l.key, tmp, nil); err != nil {
		return nil, "", fmt.Errorf("input: download %s: %w", l.name, err)
	}
	f, err = os.Open(tmp)
	if err != nil {
		os.Remove(tmp)
		return nil, "", fmt.Errorf("input: %w", err)
	}
	return f, tmp, nil
}

// recoverParquet turns a panic of the Parquet library on a malformed file
// into an error: input from outside must never crash the process.
func recoverParquet(name string, err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("input: %s: malformed Parquet file: %v", name, r)
	}
}

// checkParquetFooter checks the magic numbers and that the footer length
// fits in the file, before the library allocates a buffer of that length.
func checkParquetFooter(name string, f io.ReaderAt, size int64) error {
	var head, tail [8]byte
	if size < 12 {
		return fmt.Errorf("input: %s: not a Parquet file (%d bytes)", name, size)
	}
	if _, err := f.ReadAt(head[:4], 0); err != nil {
		return fmt.Errorf("input: %s: %w", name, err)
	}
	if _, err := f.ReadAt(tail[:], size-8); err != nil {
		return fmt.Errorf("input: %s: %w", name, err)
	}
	if string(head[:4]) != "PAR1" || string(tail[4:]) != "PAR1" {
		return fmt.Errorf("input: %s: not a Parquet file (bad magic; encrypted files are not supported)", name)
	}
	if n := int64(binary.LittleEndian.Uint32(tail[:4])); n > size-12 {
		return fmt.Errorf("input: %s: footer length %d exceeds the file (%d bytes)", name, n, size)
	}
	return nil
}

// checkParquetLayout checks the footer's row groups against the file size
// before any page is read, so a forged size cannot cause huge reads.
func checkParquetLayout(name string, pf *parquet.File, size int64) error {
	md := pf.Metadata()
	for g, rg := range md.RowGroups {
		if rg.NumRows < 0 || rg.NumRows > md.NumRows {
			return fmt.Errorf("input: %s: row group %d declares %d rows of %d in the file", name, g, rg.NumRows, md.NumRows)
		}
		for c, ch := range rg.Columns {
			m := ch.MetaData
			for _, v := range []int64{m.TotalCompressedSize, m.DataPageOffset, m.DictionaryPageOffset, m.IndexPageOffset} {
				if v < 0 || v > size {
					return fmt.Errorf("input: %s: row group %d column %d lies outside the file", name, g, c)
				}
			}
			if m.DataPageOffset+m.TotalCompressedSize > size || m.TotalUncompressedSize < 0 || m.TotalUncompressedSize > 64*size+(1<<20) {
				return fmt.Errorf("input: %s: row group %d column %d has impossible sizes", name, g, c)
			}
		}
	}
	return nil
}

func openParquetFile(ctx context.Context, l location, tempDir string) (_ fileReader, err error) {
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
	p.pf, err = parquet.OpenFile(f, st.Size())
	if err != nil {
		return fail(fmt.Errorf("input: %s: not a readable Parquet file: %w", l.name, err))
	}
	if err := checkParquetLayout(l.name, p.pf, st.Size()); err != nil {
		return fail(err)
	}
	for _, field := range p.pf.Schema().Fields() {
		if !field.Leaf() || field.Repeated() {
			return fail(fmt.Errorf("input: %s: column %q is nested or repeated; only flat schemas are supported", l.name, field.Name()))
		}
		p.names = append(p.names, field.Name())
		p.str = append(p.str, isString(field))
	}
	p.groups = p.pf.RowGroups()
	return p, nil
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

func parquetColumns(ctx context.Context, l location, tempDir string) (_ []Column, err error) {
	defer recoverParquet(l.name, &err)
	fr, err := openParquetFile(ctx, l, tempDir)
	if err != nil {
		return nil, err
	}
	defer fr.close()
	var cols []Column
	for _, field := range fr.(*parquetFile).pf.Schema().Fields() {
		cols = append(cols, Column{Name: field.Name(), Encoding: parquetEncoding(field)})
	}
	return cols, nil
}

// pqRow is the Aux of a Parquet item.
type pqRow struct {
	row   parquet.Row
	names []string
	str   []bool
}

func (p *parquetFile) read(ctx context.Context, dst []Item, max int) (_ []Item, err error) {
	defer recoverParquet(p.name, &err)
	if err := ctx.Err(); err != nil {
		return dst, err
	}
	for {
		if p.rows == nil {
			if p.g >= len(p.groups) {
				return dst, io.EOF
			}
			p.rows = p.groups[p.g].Rows()
			p.g++
		}
		if cap(p.buf) < max {
			p.buf = make([]parquet.Row, max)
		}
		n, err := p.rows.ReadRows(p.buf[:max])
		for i := 0; i < n; i++ {
			p.row++
			dst = append(dst, Item{File: p.name, Pos: p.row, Aux: &pqRow{row: p.buf[i].Clone(), names: p.names, str: p.str}})
		}
		if err == io.EOF {
			cerr := p.rows.Close()
			p.rows = nil
			if cerr != nil {
				return dst, fmt.Errorf("input: %s: %w", p.name, cerr)
			}
			if n > 0 {
				return dst, nil
			}
			continue
		}
		if err != nil {
			return dst, fmt.Errorf("input: %s: row %d: %w", p.name, p.row+1, err)
		}
		if n > 0 {
			return dst, nil
		}
	}
}

func (p *parquetFile) close() error {
	var errs []error
	if p.rows != nil {
		errs = append(errs, p.rows.Close())
		p.rows = nil
	}
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

func decodeParquet(_ context.Context, it *Item, fn FieldFunc) (err error) {
	defer recoverParquet(it.File, &err)
	r, ok := it.Aux.(*pqRow)
	if !ok {
		return fmt.Errorf("input: %s: not a Parquet row", it.Loc())
	}
	for _, v := range r.row {
		c := v.Column()
		if c < 0 || c >= len(r.names) {
			return fmt.Errorf("input: %s: value for unknown column %d", it.Loc(), c)
		}
		var out Value
		switch {
		case v.IsNull():
			out.Kind = Null
		case v.Kind() == parquet.Boolean:
			out.Kind = Bool
			if v.Boolean() {
				out.Int = 1
			}
		case v.Kind() == parquet.Int32:
			out = Value{Kind: Int, Int: int64(v.Int32())}
		case v.Kind() == parquet.Int64:
			out = Value{Kind: Int, Int: v.Int64()}
		case v.Kind() == parquet.Float:
			out = Value{Kind: Float, Float: float64(v.Float())}
		case v.Kind() == parquet.Double:
			out = Value{Kind: Float, Float: v.Double()}
		case r.str[c]:
			out = Value{Kind: String, Bytes: v.ByteArray()}
		default:
			out = Value{Kind: Bytes, Bytes: v.ByteArray()}
		}
		if err := fn([]byte(r.names[c]), out); err != nil {
			return err
		}
	}
	return nil
}
