package hashing_test

import (
	"fmt"

	"github.com/sluicedata/sluice/format/hashing"
)

// Digests are lowercase hex, as MosaicML Streaming writes them into
// index.json.
func ExampleSum() {
	for _, name := range []string{"sha1", "xxh64", "xxh3_64"} {
		sum, err := hashing.Sum(name, []byte("hello"))
		if err != nil {
			panic(err)
		}
		fmt.Println(name, sum)
	}
	_, err := hashing.Sum("crc7", nil)
	fmt.Println(err != nil)
	// Output:
	// sha1 aaf4c61ddcc5e8a2dabede0f3b482cd9aea9434d
	// xxh64 26c7827d889f6da3
	// xxh3_64 9555e8555c62dcfd
	// true
}
