package input

import (
	"bufio"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
)

// skipBOM drops a UTF-8 byte order mark at the start of r, which Excel's
// "CSV UTF-8" export and Windows editors' "UTF-8 with BOM" write (pandas
// and Python's utf-8-sig codec drop it); left in, it would be part of a
// CSV's first column name, or make a JSON-lines file's first line invalid.
func skipBOM(r io.Reader) io.Reader {
	br := bufio.NewReader(r)
	dropBOM(br)
	return br
}

// dropBOM discards a UTF-8 byte order mark at br's current position.
func dropBOM(br *bufio.Reader) {
	if b, err := br.Peek(3); err == nil && string(b) == "\ufeff" {
		br.Discard(3)
	}
}

// csvFile reads the rows of one CSV or TSV file with a header line.
type csvFile struct {
	name   string
	rc     io.ReadCloser
	r      *csv.Reader
	header []string
	row    int64
}

func newCSVReader(r io.Reader, sep rune) *csv.Reader {
	cr := csv.NewReader(skipBOM(r))
	cr.Comma = sep
	cr.ReuseRecord = false
	if sep == '\t' {
		cr.LazyQuotes = true
	}
	return cr
}

func openCSVFile(ctx context.Context, l location, sep rune) (fileReader, error) {
	rc, err := l.b.NewRangeReader(ctx, l.key, 0, -1)
	if err != nil {
		return nil, fmt.Errorf("input: open %s: %w", l.name, err)
	}
	f := &csvFile{name: l.name, rc: rc, r: newCSVReader(rc, sep)}
	f.header, err = f.r.Read()
	if err != nil {
		rc.Close()
		if err == io.EOF {
			return nil, fmt.Errorf("input: %s: empty file, want a header line", l.name)
		}
		return nil, fmt.Errorf("input: %s: header: %w", l.name, err)
	}
	if err := checkHeader(l.name, f.header); err != nil {
		rc.Close()
		return nil, err
	}
	f.r.FieldsPerRecord = len(f.header)
	f.row = 1
	return f, nil
}

func checkHeader(name string, h []string) error {
	seen := make(map[string]bool, len(h))
	for i, c := range h {
		if c == "" {
			return fmt.Errorf("input: %s: header column %d has no name", name, i+1)
		}
		if seen[c] {
			return fmt.Errorf("input: %s: header names column %q twice", name, c)
		}
		seen[c] = true
	}
	return nil
}

// csvColumns reads the header of the first file. The encodings are left
// empty: they are inferred from the values.
func csvColumns(ctx context.Context, l location, sep rune) ([]Column, error) {
	f, err := openCSVFile(ctx, l, sep)
	if err != nil {
		return nil, err
	}
	defer f.close()
	cf := f.(*csvFile)
	cols := make([]Column, len(cf.header))
	for i, h := range cf.header {
		cols[i] = Column{Name: h}
	}
	return cols, nil
}

func (f *csvFile) read(ctx context.Context, dst []Item, max int) ([]Item, error) {
	if err := ctx.Err(); err != nil {
		return dst, err
	}
	for n := 0; n < max; n++ {
		rec, err := f.r.Read()
		if err == io.EOF {
			if n == 0 {
				return dst, io.EOF
			}
			return dst, nil
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				return dst, fmt.Errorf("input: %s:%d: %w", f.name, pe.StartLine, err)
			}
			return dst, fmt.Errorf("input: read %s: %w", f.name, err)
		}
		f.row++
		dst = append(dst, Item{File: f.name, Pos: f.row, Strs: rec, Aux: f.header})
	}
	return dst, nil
}

func (f *csvFile) close() error { return f.rc.Close() }

func decodeCSV(_ context.Context, it *Item, fn FieldFunc) error {
	header, _ := it.Aux.([]string)
	if len(header) != len(it.Strs) {
		return fmt.Errorf("input: %s: %d cells for %d columns", it.Loc(), len(it.Strs), len(header))
	}
	for i, cell := range it.Strs {
		if err := fn([]byte(header[i]), Value{Kind: Text, Bytes: []byte(cell)}); err != nil {
			return err
		}
	}
	return nil
}
