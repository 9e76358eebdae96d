package memstore_test

import (
	"context"
	"fmt"
	"io"

	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/memstore"
)

// A memstore bucket behaves like any other store: an object appears when its
// writer closes, and List walks keys in order.
func ExampleNew() {
	ctx := context.Background()
	b := memstore.New("example")
	defer b.Close()

	for _, key := range []string{"data/shard.00001.mds", "data/index.json", "data/shard.00000.mds"} {
		w, err := b.NewWriter(ctx, key, nil)
		if err != nil {
			panic(err)
		}
		if _, err := io.WriteString(w, "contents of "+key); err != nil {
			panic(err)
		}
		if err := w.Close(); err != nil {
			panic(err)
		}
	}

	err := b.List(ctx, "data/shard.", func(o storage.ObjectInfo) error {
		fmt.Println(o.Key, o.Size)
		return nil
	})
	if err != nil {
		panic(err)
	}

	r, err := b.NewRangeReader(ctx, "data/index.json", 17, 5)
	if err != nil {
		panic(err)
	}
	defer r.Close()
	part, err := io.ReadAll(r)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s\n", part)
	// Output:
	// data/shard.00000.mds 32
	// data/shard.00001.mds 32
	// index
}
