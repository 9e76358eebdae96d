package gcsstore_test

import (
	"context"
	"log"
	"net/url"

	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/gcsstore"
)

// Opening a gs:// dataset with Application Default Credentials (or the
// emulator named by STORAGE_EMULATOR_HOST).
func ExampleOpen() {
	ctx := context.Background()
	u, err := url.Parse("gs://my-datasets/c4/train")
	if err != nil {
		log.Fatal(err)
	}
	b, err := gcsstore.Open(ctx, u)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	if _, err := storage.Download(ctx, b, "index.json", "/tmp/index.json", nil); err != nil {
		log.Fatal(err)
	}
}

// Connecting to fake-gcs-server (run with -scheme http).
func ExampleNew() {
	ctx := context.Background()
	b, err := gcsstore.New(ctx, "datasets", "mds", &gcsstore.Options{Endpoint: "http://127.0.0.1:4443"})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	if err := storage.UploadFile(ctx, b, "index.json", "/tmp/index.json", nil); err != nil {
		log.Fatal(err)
	}
}
