package compress_test

import (
	"bytes"
	"fmt"

	"github.com/sluicedata/sluice/format/compress"
)

// A shard compressed with a "family:level" string decompresses by family,
// bounded by the raw size the index records.
func Example() {
	raw := bytes.Repeat([]byte("sluice "), 1000)
	packed, err := compress.Compress("zstd:7", raw)
	if err != nil {
		panic(err)
	}
	spec, err := compress.Parse("zstd:7")
	if err != nil {
		panic(err)
	}
	got, err := compress.Decompress(spec.Family, packed, int64(len(raw)))
	if err != nil {
		panic(err)
	}
	fmt.Println(spec.Family, len(raw), bytes.Equal(got, raw), len(packed) < len(raw)/10)

	// A declared size smaller than the data is refused, never overrun.
	_, err = compress.Decompress(spec.Family, packed, 100)
	fmt.Println(err != nil)
	// Output:
	// zstd 7000 true true
	// true
}
