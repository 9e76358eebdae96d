package cache_test

import (
	"context"
	"fmt"
	"os"

	"github.com/sluicedata/sluice/cache"
	"github.com/sluicedata/sluice/storage/memstore"
)

// A shard fetched once into a bounded cache and leased while it is read.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "sluice-cache-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	store := memstore.New("example")
	w, _ := store.NewWriter(ctx, "shard.00000.mds", nil)
	w.Write([]byte("hello, shard"))
	w.Close()

	c, err := cache.Open(ctx, dir, &cache.Options{Limit: 1 << 20})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	d, err := c.Add(ctx, &cache.Source{Bucket: store, Shards: []cache.Shard{
		{Files: []cache.File{{Raw: "shard.00000.mds", RawBytes: 12}}},
	}})
	if err != nil {
		panic(err)
	}
	for range 2 {
		l, err := d.Acquire(ctx, 0)
		if err != nil {
			panic(err)
		}
		b, _ := os.ReadFile(l.Path(0))
		fmt.Printf("%s (hit: %v)\n", b, l.Hit())
		l.Release()
	}
	used, _ := c.Usage(ctx)
	fmt.Println("bytes in cache:", used, "downloads:", c.Stats().Downloads)
	// Output:
	// hello, shard (hit: false)
	// hello, shard (hit: true)
	// bytes in cache: 12 downloads: 1
}
