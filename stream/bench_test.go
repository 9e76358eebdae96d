package stream_test

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"golang.org/x/sync/errgroup"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/mds"
	"github.com/sluicedata/sluice/plan"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/filestore"
	"github.com/sluicedata/sluice/storage/s3store"
	"github.com/sluicedata/sluice/stream"
)

// benchDataset writes samples of payload bytes into a new directory.
func benchDataset(b *testing.B, samples, payload int, sizeLimit int64, comp string) string {
	b.Helper()
	dir := b.TempDir()
	writeDataset(b, dir, spec{samples: samples, payload: payload, sizeLimit: sizeLimit, compression: comp})
	return dir
}

// iterateAll reads every sample of one rank's epoch and returns the count
// and bytes.
func iterateAll(b *testing.B, ds *stream.Dataset) (n, bytes int64) {
	ctx := context.Background()
	ep, err := ds.NewEpoch(ctx, plan.World{Nodes: 1, RanksPerNode: 1}, 1)
	if err != nil {
		b.Fatal(err)
	}
	it, err := ep.RankIter(ctx)
	if err != nil {
		b.Fatal(err)
	}
	for it.Next() {
		n++
		bytes += int64(len(it.Record()))
	}
	if err := it.Err(); err != nil {
		b.Fatal(err)
	}
	it.Close()
	return n, bytes
}

// BenchmarkWarmIteration reads a whole epoch from a warm cache (every
// shard local) through the Go API, one consumer on one goroutine. Records
// are views of the mapped shards; the -copy cases also copy each record
// out, as a consumer that keeps the bytes would.
func BenchmarkWarmIteration(b *testing.B) {
	for _, c := range []struct {
		name             string
		samples, payload int
		copy             bool
	}{
		{"200B", 200_000, 200, false},
		{"200B-copy", 200_000, 200, true},
		{"100KB", 2_000, 100 << 10, false},
		{"100KB-copy", 2_000, 100 << 10, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			dir := benchDataset(b, c.samples, c.payload, 64<<20, "")
			ds, err := stream.Open(context.Background(), &stream.Options{Local: dir, BatchSize: 32})
			if err != nil {
				b.Fatal(err)
			}
			defer ds.Close()
			iterateAll(b, ds) // warm the page cache
			b.ReportAllocs()
			var n, bytes int64
			b.ResetTimer()
			var buf []byte
			for b.Loop() {
				if !c.copy {
					k, m := iterateAll(b, ds)
					n, bytes = n+k, bytes+m
					continue
				}
				ep, err := ds.NewEpoch(context.Background(), plan.World{Nodes: 1, RanksPerNode: 1}, 1)
				if err != nil {
					b.Fatal(err)
				}
				it, _ := ep.RankIter(context.Background())
				for it.Next() {
					buf = append(buf[:0], it.Record()...)
					n++
					bytes += int64(len(buf))
				}
				it.Close()
			}
			s := b.Elapsed().Seconds()
			b.ReportMetric(float64(n)/s, "samples/s")
			b.ReportMetric(float64(bytes)/s/1e6, "MB/s")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/sample")
		})
	}
}

// uploadDir copies a local dataset into bucket.
func uploadDir(b *testing.B, dir string, bucket storage.Bucket) []string {
	b.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	var keys []string
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			b.Fatal(err)
		}
		w, err := bucket.NewWriter(context.Background(), e.Name(), nil)
		if err != nil {
			b.Fatal(err)
		}
		w.Write(data)
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
		if e.Name() != format.IndexFile {
			keys = append(keys, e.Name())
		}
	}
	return keys
}

// rawParallelGET downloads keys with 8 parallel whole-object GETs and
// returns the bytes per second: the store's rate to compare against.
func rawParallelGET(b *testing.B, bucket storage.Bucket, keys []string) float64 {
	start := time.Now()
	var total int64
	g, ctx := errgroup.WithContext(context.Background())
	g.SetLimit(8)
	counts := make([]int64, len(keys))
	for i, k := range keys {
		g.Go(func() error {
			r, err := bucket.NewRangeReader(ctx, k, 0, -1)
			if err != nil {
				return err
			}
			defer r.Close()
			n, err := io.Copy(io.Discard, r)
			counts[i] = n
			return err
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	for _, n := range counts {
		total += n
	}
	return float64(total) / time.Since(start).Seconds()
}

// BenchmarkColdStreaming streams a whole epoch into an empty cache from
// a store, and reports the rate against raw parallel GETs of the same
// shards from that store.
func BenchmarkColdStreaming(b *testing.B) {
	src := benchDataset(b, 640, 100<<10, 4<<20, "")
	stores := []struct {
		name string
		open func(b *testing.B) storage.Bucket
	}{
		{"memstore", func(b *testing.B) storage.Bucket {
			reg, _ := memDatasetFromDir(b, src)
			bk, _ := reg.Open(context.Background(), "mem://data")
			return bk
		}},
		{"filestore", func(b *testing.B) storage.Bucket {
			bk, err := filestore.New(src)
			if err != nil {
				b.Fatal(err)
			}
			return nopCloser{bk}
		}},
	}
	if ep := os.Getenv("SLUICE_TEST_S3_ENDPOINT"); ep != "" {
		stores = append(stores, struct {
			name string
			open func(b *testing.B) storage.Bucket
		}{"s3", func(b *testing.B) storage.Bucket {
			prefix := fmt.Sprintf("bench/cold-%d", time.Now().UnixNano())
			bk, err := s3store.New(context.Background(), os.Getenv("SLUICE_TEST_S3_BUCKET"), prefix, &s3store.Options{
				Endpoint: ep, Region: os.Getenv("SLUICE_TEST_S3_REGION"),
				Credentials: credentials.NewStaticCredentialsProvider(
					os.Getenv("SLUICE_TEST_S3_ACCESS_KEY"), os.Getenv("SLUICE_TEST_S3_SECRET_KEY"), ""),
			})
			if err != nil {
				b.Fatal(err)
			}
			uploadDir(b, src, bk)
			return nopCloser{bk}
		}})
	}
	for _, st := range stores {
		b.Run(st.name, func(b *testing.B) {
			bucket := st.open(b)
			reg := &storage.Registry{}
			reg.Register("bench", func(context.Context, *url.URL) (storage.Bucket, error) { return bucket, nil })
			var keys []string
			entries, _ := os.ReadDir(src)
			for _, e := range entries {
				if e.Name() != format.IndexFile {
					keys = append(keys, e.Name())
				}
			}
			raw := rawParallelGET(b, bucket, keys)
			var bytes int64
			var first time.Duration
			b.ResetTimer()
			for b.Loop() {
				ds, err := stream.Open(context.Background(), &stream.Options{Remote: "bench://x", Local: b.TempDir(),
					Registry: reg, BatchSize: 32, Predownload: 1024})
				if err != nil {
					b.Fatal(err)
				}
				_, m := iterateAll(b, ds)
				bytes += m
				first += ds.Stats().FirstSample
				ds.Close()
			}
			rate := float64(bytes) / b.Elapsed().Seconds()
			b.ReportMetric(rate/1e6, "MB/s")
			b.ReportMetric(raw/1e6, "rawGET-MB/s")
			b.ReportMetric(rate/raw*100, "%ofGET")
			b.ReportMetric(float64(first.Microseconds())/float64(b.N)/1e3, "ms-first-sample")
		})
	}
}

type nopCloser struct{ storage.Bucket }

func (nopCloser) Close() error { return nil }

// memDatasetFromDir uploads a written dataset to a memstore.
func memDatasetFromDir(b *testing.B, dir string) (*storage.Registry, *countingBucket) {
	b.Helper()
	cb := &countingBucket{Bucket: newMem(), gets: map[string]int{}}
	uploadDir(b, dir, cb.Bucket)
	r := &storage.Registry{}
	r.Register("mem", func(context.Context, *url.URL) (storage.Bucket, error) { return cb, nil })
	return r, cb
}

// BenchmarkTimeToFirstSample opens a remote dataset into an empty cache
// and reads one sample (index GET, plan, shard GET, open), and reports it
// against the time of one plain index GET plus one plain shard GET.
func BenchmarkTimeToFirstSample(b *testing.B) {
	src := benchDataset(b, 640, 100<<10, 4<<20, "")
	buckets := map[string]storage.Bucket{}
	reg, _ := memDatasetFromDir(b, src)
	buckets["memstore"], _ = reg.Open(context.Background(), "mem://data")
	fsDir := b.TempDir()
	fb, err := filestore.New(fsDir)
	if err != nil {
		b.Fatal(err)
	}
	uploadDir(b, src, fb)
	buckets["filestore"] = nopCloser{fb}
	if ep := os.Getenv("SLUICE_TEST_S3_ENDPOINT"); ep != "" {
		bk, err := s3store.New(context.Background(), os.Getenv("SLUICE_TEST_S3_BUCKET"),
			fmt.Sprintf("bench/ttfs-%d", time.Now().UnixNano()), &s3store.Options{
				Endpoint: ep, Region: os.Getenv("SLUICE_TEST_S3_REGION"),
				Credentials: credentials.NewStaticCredentialsProvider(
					os.Getenv("SLUICE_TEST_S3_ACCESS_KEY"), os.Getenv("SLUICE_TEST_S3_SECRET_KEY"), ""),
			})
		if err != nil {
			b.Fatal(err)
		}
		uploadDir(b, src, bk)
		buckets["s3"] = nopCloser{bk}
	}
	for _, name := range []string{"memstore", "filestore", "s3"} {
		bucket, ok := buckets[name]
		if !ok {
			continue
		}
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			reg := &storage.Registry{}
			reg.Register("bench", func(context.Context, *url.URL) (storage.Bucket, error) { return bucket, nil })
			// The reference: one index GET plus one shard GET.
			var ref time.Duration
			const refRuns = 5
			for range refRuns {
				start := time.Now()
				for _, k := range []string{format.IndexFile, "shard.00000.mds"} {
					r, err := bucket.NewRangeReader(ctx, k, 0, -1)
					if err != nil {
						b.Fatal(err)
					}
					io.Copy(io.Discard, r)
					r.Close()
				}
				ref += time.Since(start)
			}
			ref /= refRuns
			b.ReportAllocs()
			b.ResetTimer()
			var first time.Duration
			for b.Loop() {
				local := b.TempDir()
				start := time.Now()
				ds, err := stream.Open(ctx, &stream.Options{Remote: "bench://x", Local: local, Registry: reg, BatchSize: 32})
				if err != nil {
					b.Fatal(err)
				}
				ep, err := ds.NewEpoch(ctx, plan.World{Nodes: 1, RanksPerNode: 1}, 1)
				if err != nil {
					b.Fatal(err)
				}
				it, _ := ep.RankIter(ctx)
				if !it.Next() {
					b.Fatal(it.Err())
				}
				first += time.Since(start)
				it.Close()
				ds.Close()
			}
			// ns/op also counts Close (which waits for the background
			// fetches and the shard's sync) and the temporary directory.
			per := first / time.Duration(b.N)
			b.ReportMetric(float64(per.Microseconds())/1e3, "ms-first-sample")
			b.ReportMetric(float64(ref.Microseconds())/1e3, "ms-2GETs")
			b.ReportMetric(float64(per)/float64(ref), "x-2GETs")
		})
	}
}

// BenchmarkResumeAt90Percent resumes a 10M-sample epoch at 90% with the
// needed shards local and measures the time to the first sample (plan,
// iterator, lease, open, read: ms-first-sample) and the whole cost of
// the iterator including the plan's remaining mapping (ns/op).
func BenchmarkResumeAt90Percent(b *testing.B) {
	for _, shuffle := range []bool{false, true} {
		b.Run(fmt.Sprintf("shuffle=%v", shuffle), func(b *testing.B) {
			dir := b.TempDir()
			// One real shard of 10,000 fixed-size samples, hard-linked
			// under 1,000 names: an index of 10M samples with no copies.
			tmpl := filepath.Join(b.TempDir(), "tmpl")
			w, err := mds.NewWriter(tmpl, &mds.WriterOptions{Columns: map[string]string{"id": "int"}})
			if err != nil {
				b.Fatal(err)
			}
			for i := range 10_000 {
				w.Write(format.Sample{"id": int64(i)})
			}
			if err := w.Finish(); err != nil {
				b.Fatal(err)
			}
			info := w.Shards()[0]
			idx := &format.Index{}
			for k := range 1000 {
				s := info
				s.RawData.Basename = fmt.Sprintf("shard.%05d.mds", k)
				if err := os.Link(filepath.Join(tmpl, info.RawData.Basename), filepath.Join(dir, s.RawData.Basename)); err != nil {
					b.Fatal(err)
				}
				idx.Shards = append(idx.Shards, s)
			}
			if err := os.WriteFile(filepath.Join(dir, format.IndexFile), format.AppendIndex(nil, idx), 0o644); err != nil {
				b.Fatal(err)
			}
			ds, err := stream.Open(context.Background(), &stream.Options{Local: dir, BatchSize: 32, Shuffle: shuffle})
			if err != nil {
				b.Fatal(err)
			}
			defer ds.Close()
			state := plan.State{Epoch: 0, SampleInEpoch: 9_000_000, NumCanonicalNodes: 1, ShuffleSeed: 9176, InitialPhysicalNodes: 1}
			b.ReportAllocs()
			var first time.Duration
			for b.Loop() {
				start := time.Now()
				if err := ds.Load(state); err != nil {
					b.Fatal(err)
				}
				ep, err := ds.NewEpoch(context.Background(), plan.World{Nodes: 1, RanksPerNode: 1}, 1)
				if err != nil {
					b.Fatal(err)
				}
				it, err := ep.RankIter(context.Background())
				if err != nil {
					b.Fatal(err)
				}
				if !it.Next() {
					b.Fatal(it.Err())
				}
				first += time.Since(start)
				// Close waits for the rest of the plan's mapping, which
				// the iterator does in the background: ns/op is the
				// whole cost, ms-first-sample the latency.
				it.Close()
			}
			b.ReportMetric(float64(first.Microseconds())/float64(b.N)/1e3, "ms-first-sample")
		})
	}
}
