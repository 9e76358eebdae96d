package s3store_test

import (
	"context"
	"fmt"
	"log"
	"net/url"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/s3store"
)

// Opening a dataset URL the way the CLI does: credentials, region and
// endpoint come from the environment (AWS_PROFILE, AWS_ACCESS_KEY_ID,
// S3_ENDPOINT_URL, ...).
func ExampleOpen() {
	ctx := context.Background()
	u, err := url.Parse("s3://my-datasets/imagenet/train?requester_pays=true")
	if err != nil {
		log.Fatal(err)
	}
	b, err := s3store.Open(ctx, u)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	err = b.List(ctx, "shard.", func(o storage.ObjectInfo) error {
		fmt.Println(o.Key, o.Size)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
}

// Connecting to an S3-compatible server (MinIO, versitygw, Ceph) with
// static credentials.
func ExampleNew() {
	ctx := context.Background()
	b, err := s3store.New(ctx, "datasets", "mds/v1", &s3store.Options{
		Endpoint:    "http://127.0.0.1:7070",
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("ACCESS", "SECRET", ""),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	if _, err := storage.Download(ctx, b, "index.json", "/tmp/index.json", nil); err != nil {
		log.Fatal(err)
	}
}
