package xsv_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/xsv"
)

func Example() {
	dir, _ := os.MkdirTemp("", "xsv-example")
	defer os.RemoveAll(dir)

	w, err := xsv.NewWriter(dir, &xsv.WriterOptions{
		Format:  xsv.TSV,
		Columns: map[string]string{"id": "int", "text": "str", "score": "float"},
	})
	if err != nil {
		panic(err)
	}
	for i, s := range []string{"hello", "wörld"} {
		if err := w.Write(format.Sample{"id": i, "text": s, "score": float64(i) / 4}); err != nil {
			panic(err)
		}
	}
	if err := w.Finish(); err != nil {
		panic(err)
	}

	data, _ := os.ReadFile(filepath.Join(dir, "shard.00000.tsv"))
	fmt.Printf("%q\n", data)
	b, _ := os.ReadFile(filepath.Join(dir, "index.json"))
	idx, err := format.ParseIndex(b)
	if err != nil {
		panic(err)
	}
	sh, err := xsv.OpenDir(dir, &idx.Shards[0])
	if err != nil {
		panic(err)
	}
	defer sh.Close()
	for j := 0; j < sh.Len(); j++ {
		s, _ := sh.Sample(j)
		fmt.Printf("id=%v text=%v score=%v\n", s["id"], s["text"], s["score"])
	}
	// Output:
	// "id\tscore\ttext\n0\t0.0\thello\n1\t0.25\twörld\n"
	// id=0 text=hello score=0
	// id=1 text=wörld score=0.25
}
