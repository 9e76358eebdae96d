package input

import (
	"context"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"

	"github.com/sluicedata/sluice/format/wds"
)

// wdsFile reads the samples of one WebDataset tar.
type wdsFile struct {
	name string
	rc   io.ReadCloser
	r    *wds.Reader
	n    int64
}

func openWDSFile(ctx context.Context, l location) (fileReader, error) {
	rc, err := l.b.NewRangeReader(ctx, l.key, 0, -1)
	if err != nil {
		return nil, fmt.Errorf("input: open %s: %w", l.name, err)
	}
	return &wdsFile{name: l.name, rc: rc, r: wds.NewReader(rc, nil)}, nil
}

func (f *wdsFile) read(ctx context.Context, dst []Item, max int) ([]Item, error) {
	if err := ctx.Err(); err != nil {
		return dst, err
	}
	for n := 0; n < max; n++ {
		if !f.r.Next() {
			if err := f.r.Err(); err != nil {
				return dst, fmt.Errorf("input: %s: %w", f.name, err)
			}
			if n == 0 {
				return dst, io.EOF
			}
			return dst, nil
		}
		f.n++
		s := *f.r.Sample()
		dst = append(dst, Item{File: f.name, Pos: f.n, Data: []byte(s.Key), Aux: &s})
	}
	return dst, nil
}

func (f *wdsFile) close() error { return f.rc.Close() }

// KeyColumn is the column that carries a WebDataset sample's key.
const KeyColumn = "__key__"

// wdsEncoding maps a WebDataset field (file extension) to the MDS encoding
// its bytes are stored under, following webdataset's default decoders.
func wdsEncoding(field string) string {
	ext := strings.ToLower(field)
	if i := strings.LastIndexByte(ext, '.'); i >= 0 {
		ext = ext[i+1:]
	}
	switch ext {
	case "jpg", "jpeg":
		return "jpeg"
	case "png":
		return "png"
	case "cls", "cls2", "index", "inx", "id":
		return "int"
	case "txt", "text", "transcript":
		return "str"
	case "json", "jsn":
		return "json"
	case "pyd", "pickle", "pkl":
		return "pkl"
	}
	return "bytes"
}

// wdsColumns reads the first sample of the first tar: one column per field,
// plus the key.
func wdsColumns(ctx context.Context, l location) ([]Column, error) {
	fr, err := openWDSFile(ctx, l)
	if err != nil {
		return nil, err
	}
	defer fr.close()
	items, err := fr.read(ctx, nil, 1)
	if err == io.EOF || (err == nil && len(items) == 0) {
		return nil, fmt.Errorf("input: %s: no samples in the first archive", l.name)
	}
	if err != nil {
		return nil, err
	}
	s := items[0].Aux.(*wds.Sample)
	names := append([]string(nil), s.Order...)
	sort.Strings(names)
	cols := []Column{{Name: KeyColumn, Encoding: "str"}}
	for _, n := range names {
		cols = append(cols, Column{Name: n, Encoding: wdsEncoding(n)})
	}
	return cols, nil
}

func decodeWDS(_ context.Context, it *Item, fn FieldFunc) error {
	s, ok := it.Aux.(*wds.Sample)
	if !ok {
		return fmt.Errorf("input: %s: not a WebDataset sample", it.Loc())
	}
	if err := fn([]byte(KeyColumn), Value{Kind: String, Bytes: []byte(s.Key)}); err != nil {
		return err
	}
	for _, name := range s.Order {
		v := Value{Kind: Bytes, Bytes: s.Fields[name]}
		if wdsEncoding(name) == "int" || wdsEncoding(name) == "str" {
			v.Kind = Text
		}
		if err := fn([]byte(name), v); err != nil {
			return fmt.Errorf("input: %s (key %q): %w", it.Loc(), path.Clean(s.Key), err)
		}
	}
	return nil
}
