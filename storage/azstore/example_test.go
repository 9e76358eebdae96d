package azstore_test

import (
	"context"
	"log"
	"net/url"

	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/azstore"
)

// Opening an az:// dataset with the account and credentials from the
// environment (AZURE_STORAGE_CONNECTION_STRING, or AZURE_STORAGE_ACCOUNT
// with a key, a SAS or an Entra ID login).
func ExampleOpen() {
	ctx := context.Background()
	u, err := url.Parse("az://datasets/laion/train")
	if err != nil {
		log.Fatal(err)
	}
	b, err := azstore.Open(ctx, u)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	if _, err := storage.Download(ctx, b, "index.json", "/tmp/index.json", nil); err != nil {
		log.Fatal(err)
	}
}

// Connecting to Azurite with its development account.
func ExampleNew() {
	ctx := context.Background()
	b, err := azstore.New(ctx, "datasets", "mds", &azstore.Options{
		ConnectionString: "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;" +
			"AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;" +
			"BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;",
	})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	if err := storage.UploadFile(ctx, b, "index.json", "/tmp/index.json", nil); err != nil {
		log.Fatal(err)
	}
}
