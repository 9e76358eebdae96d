package storage_test

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/memstore"
	"github.com/sluicedata/sluice/storage/retry"
)

func ExampleDownload() {
	ctx := context.Background()
	// Any Bucket works; wrap remote ones with retries.
	b, err := retry.New(memstore.New("datasets"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	shard := bytes.Repeat([]byte("sample"), 1000)
	if _, err := storage.WriteFrom(ctx, b, "train/shard.00000.mds", bytes.NewReader(shard), nil); err != nil {
		log.Fatal(err)
	}

	dir, err := os.MkdirTemp("", "cache")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	// The file appears whole or not at all; parts of 1 KiB are fetched
	// four at a time.
	n, err := storage.Download(ctx, b, "train/shard.00000.mds", filepath.Join(dir, "shard.00000.mds"),
		&storage.DownloadOptions{PartSize: 1024, Concurrency: 4})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("downloaded", n, "bytes")
	// Output: downloaded 6000 bytes
}

// The MDS writer's OnFileDone hook, pointed at a Publisher, uploads each
// shard as soon as it is finished and index.json last.
func ExamplePublisher() {
	ctx := context.Background()
	out := memstore.New("out")
	defer out.Close()
	local, err := os.MkdirTemp("", "staging")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(local)

	pub := storage.NewPublisher(ctx, out, &storage.PublishOptions{Prefix: "train/", RemoveLocal: true})
	// With the MDS writer: mds.WriterOptions{OnFileDone: pub.OnFileDone}.
	// Here the writer's calls are made by hand.
	for _, name := range []string{"shard.00000.mds", "shard.00001.mds", "index.json"} {
		path := filepath.Join(local, name)
		if err := os.WriteFile(path, []byte(name), 0o644); err != nil {
			log.Fatal(err)
		}
		if err := pub.OnFileDone(name, path); err != nil {
			log.Fatal(err)
		}
	}
	if err := pub.Wait(); err != nil {
		log.Fatal(err)
	}
	err = out.List(ctx, "", func(info storage.ObjectInfo) error {
		fmt.Println(info.Key, info.Size)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output:
	// train/index.json 10
	// train/shard.00000.mds 15
	// train/shard.00001.mds 15
}

func ExampleCopyTree() {
	ctx := context.Background()
	src, dst := memstore.New("src"), memstore.New("dst")
	for _, k := range []string{"ds/index.json", "ds/shard.00000.mds", "ds/shard.00001.mds"} {
		if _, err := storage.WriteFrom(ctx, src, k, bytes.NewReader([]byte(k)), nil); err != nil {
			log.Fatal(err)
		}
	}
	stats, err := storage.CopyTree(ctx, src, dst, &storage.CopyTreeOptions{SrcPrefix: "ds/", DstPrefix: "mirror/"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d objects, %d bytes\n", stats.Objects, stats.Bytes)
	// Output: 3 objects, 49 bytes
}
