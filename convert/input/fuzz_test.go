package input

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/filestore"
)

type fuzzRow struct {
	ID   int64  `parquet:"id"`
	Name string `parquet:"name"`
	Opt  *int32 `parquet:"opt,optional"`
}

// fuzzNested has the nested columns people have: a list of numbers, a
// list of strings, a struct.
type fuzzNested struct {
	Emb  []float32 `parquet:"emb,list"`
	Tags []string  `parquet:"tags,list"`
	M    fuzzRow   `parquet:"m"`
}

// FuzzParquet opens arbitrary bytes as a Parquet file and reads every row:
// no input may panic (the reader turns library panics into errors).
func FuzzParquet(f *testing.F) {
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[fuzzRow](&buf)
	v := int32(7)
	if _, err := w.Write([]fuzzRow{{ID: 1, Name: "a"}, {ID: 2, Name: "b", Opt: &v}}); err != nil {
		f.Fatal(err)
	}
	if err := w.Close(); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add([]byte("PAR1PAR1"))
	var nb bytes.Buffer
	nw := parquet.NewGenericWriter[fuzzNested](&nb)
	if _, err := nw.Write([]fuzzNested{{Emb: []float32{1, 2}, Tags: []string{"x"}, M: fuzzRow{ID: 3, Name: "c", Opt: &v}}, {}}); err != nil {
		f.Fatal(err)
	}
	if err := nw.Close(); err != nil {
		f.Fatal(err)
	}
	f.Add(nb.Bytes())
	reg := &storage.Registry{}
	reg.Register("file", filestore.Open)
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		p := filepath.Join(dir, "f.parquet")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		src, err := Open(ctx, p, &Options{Registry: reg})
		if err != nil {
			return
		}
		defer src.Close()
		for n := 0; n < 1000; n++ {
			items, err := src.Read(ctx, nil, 64)
			for i := range items {
				_ = src.Decode(ctx, &items[i], func([]byte, Value) error { return nil })
			}
			if errors.Is(err, io.EOF) || err != nil {
				return
			}
		}
	})
}
