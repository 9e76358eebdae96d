package convert_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sluicedata/sluice/convert"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/filestore"
)

func Example() {
	dir, _ := os.MkdirTemp("", "convert-example")
	defer os.RemoveAll(dir)
	in := filepath.Join(dir, "data.jsonl")
	_ = os.WriteFile(in, []byte(`{"id": 1, "text": "hello"}
{"id": 2, "text": "world"}
`), 0o644)

	reg := &storage.Registry{}
	reg.Register("file", filestore.Open)
	rep, err := convert.Run(context.Background(), &convert.Options{
		Input: in, Output: filepath.Join(dir, "mds"), Registry: reg, Compression: "zstd",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(rep.Columns, rep.SamplesOut, rep.Shards)
	// Output: [{id int} {text str}] 2 1
}
