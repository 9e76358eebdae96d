package jsonl_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/jsonl"
)

func Example() {
	dir, _ := os.MkdirTemp("", "jsonl-example")
	defer os.RemoveAll(dir)

	w, err := jsonl.NewWriter(dir, &jsonl.WriterOptions{
		Columns:     map[string]string{"id": "int", "text": "str", "score": "float"},
		Compression: "zstd",
		Hashes:      []string{"sha1"},
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

	b, _ := os.ReadFile(filepath.Join(dir, "index.json"))
	idx, err := format.ParseIndex(b)
	if err != nil {
		panic(err)
	}
	for k := range idx.Shards {
		sh, err := jsonl.OpenDir(dir, &idx.Shards[k])
		if err != nil {
			panic(err)
		}
		for j := 0; j < sh.Len(); j++ {
			rec, _ := sh.Record(j)
			s, _ := sh.Sample(j)
			fmt.Printf("%q -> id=%v text=%v score=%v\n", rec, s["id"], s["text"], s["score"])
		}
		sh.Close()
	}
	// Output:
	// "{\"id\": 0, \"score\": 0.0, \"text\": \"hello\"}\n" -> id=0 text=hello score=0
	// "{\"id\": 1, \"score\": 0.25, \"text\": \"w\\u00f6rld\"}\n" -> id=1 text=wörld score=0.25
}
