package s3store_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"golang.org/x/sync/errgroup"

	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/limit"
	"github.com/sluicedata/sluice/storage/retry"
	"github.com/sluicedata/sluice/storage/storagetest"
)

// Shape of the benchmark dataset: shards as an MDS writer makes them.
const (
	benchShards    = 24
	benchShardSize = 4 << 20
)

// BenchmarkShardDownload downloads a dataset's shards from the S3 server
// with N requests in parallel, two ways:
//
//   - sluice: storage.Download through the standard decorator stack
//     (s3store, request limit, retries), each shard to a temp file that is
//     synced and renamed into place (NoSync: the same without the fsyncs);
//   - sdk: the same SDK client doing plain concurrent GetObject calls,
//     copied into files (or discarded), the raw rate of the server.
//
// MB/s is the figure to compare (issue 3's target: sluice >= 90% of sdk).
func BenchmarkShardDownload(b *testing.B) {
	s := testServer(b)
	bkt := newBucket(b, s)
	for i := range benchShards {
		storagetest.Put(b, bkt, shardKey(i), storagetest.Pattern(uint64(i), benchShardSize))
	}
	lb, err := limit.New(bkt, 64)
	if err != nil {
		b.Fatal(err)
	}
	rb, err := retry.New(lb, nil)
	if err != nil {
		b.Fatal(err)
	}
	client := bkt.Client()
	bucketName := s.bucket
	root := bkt.URL("")[len("s3://"+bucketName+"/"):]

	for _, n := range []int{4, 16} {
		b.Run(fmt.Sprintf("sluice/N=%d", n), func(b *testing.B) {
			runShards(b, n, func(ctx context.Context, i int, dst string) error {
				_, err := storage.Download(ctx, rb, shardKey(i), dst, &storage.DownloadOptions{Size: benchShardSize})
				return err
			})
		})
		b.Run(fmt.Sprintf("sluice-nosync/N=%d", n), func(b *testing.B) {
			runShards(b, n, func(ctx context.Context, i int, dst string) error {
				_, err := storage.Download(ctx, rb, shardKey(i), dst, &storage.DownloadOptions{Size: benchShardSize, NoSync: true})
				return err
			})
		})
		b.Run(fmt.Sprintf("sdk-to-file/N=%d", n), func(b *testing.B) {
			runShards(b, n, func(ctx context.Context, i int, dst string) error {
				out, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucketName), Key: aws.String(root + shardKey(i))})
				if err != nil {
					return err
				}
				defer out.Body.Close()
				f, err := os.Create(dst)
				if err != nil {
					return err
				}
				if _, err := io.Copy(f, out.Body); err != nil {
					f.Close()
					return err
				}
				return f.Close()
			})
		})
		b.Run(fmt.Sprintf("sdk-discard/N=%d", n), func(b *testing.B) {
			runShards(b, n, func(ctx context.Context, i int, _ string) error {
				out, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucketName), Key: aws.String(root + shardKey(i))})
				if err != nil {
					return err
				}
				defer out.Body.Close()
				_, err = io.Copy(io.Discard, out.Body)
				return err
			})
		})
	}
}

func shardKey(i int) string { return "bench/shard." + strconv.Itoa(i) + ".mds" }

// runShards fetches every shard once per iteration with n in parallel.
func runShards(b *testing.B, n int, fetch func(ctx context.Context, i int, dst string) error) {
	b.SetBytes(benchShards * benchShardSize)
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		dir := b.TempDir()
		b.StartTimer()
		g, ctx := errgroup.WithContext(b.Context())
		g.SetLimit(n)
		for i := range benchShards {
			g.Go(func() error { return fetch(ctx, i, filepath.Join(dir, filepath.Base(shardKey(i)))) })
		}
		if err := g.Wait(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBucket runs the shared storage benchmarks on the S3 server.
func BenchmarkBucket(b *testing.B) {
	s := testServer(b)
	storagetest.RunBenchmarks(b, newBucket(b, s))
}
