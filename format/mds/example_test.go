package mds_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/mds"
)

func Example() {
	dir, _ := os.MkdirTemp("", "mds-example")
	defer os.RemoveAll(dir)
	data := filepath.Join(dir, "data")

	w, err := mds.NewWriter(data, &mds.WriterOptions{
		Columns:     map[string]string{"id": "int", "text": "str"},
		Compression: "zstd",
		Hashes:      []string{"sha1", "xxh64"},
		SizeLimit:   mds.DefaultSizeLimit,
	})
	if err != nil {
		panic(err)
	}
	for i, s := range []string{"hello", "world"} {
		if err := w.Write(format.Sample{"id": i, "text": s}); err != nil {
			panic(err)
		}
	}
	if err := w.Finish(); err != nil {
		panic(err)
	}

	r, err := mds.Open(data, nil)
	if err != nil {
		panic(err)
	}
	defer r.Close()
	sc := r.Scan(0)
	for sc.Next() {
		s := sc.Sample()
		fmt.Println(s["id"], s["text"])
	}
	if err := sc.Err(); err != nil {
		panic(err)
	}
	last, _ := r.Sample(-1)
	fmt.Println(r.Len(), last["text"])
	// Output:
	// 0 hello
	// 1 world
	// 2 world
}

func ExampleShard_Record() {
	dir, _ := os.MkdirTemp("", "mds-example")
	defer os.RemoveAll(dir)
	w, _ := mds.NewWriter(dir, &mds.WriterOptions{Columns: map[string]string{"x": "bytes"}})
	w.Write(format.Sample{"x": []byte("abc")})
	w.Finish()

	r, _ := mds.Open(dir, nil)
	defer r.Close()
	s, _ := r.Shard(0)
	rec, _ := s.Record(0) // a view of the mapped file: no copy
	off, n, _ := s.Span(0)
	cols, _ := s.Columns(0, rec, nil)
	fmt.Println(off, n, string(cols[0]))
	// Output: 176 7 abc
}
