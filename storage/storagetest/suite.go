package storagetest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/sluicedata/sluice/storage"
)

// Options describes what a bucket under test can do. A nil *Options means
// a writable bucket that lists.
type Options struct {
	// ReadOnly says the bucket rejects NewWriter and Delete with an error
	// matching storage.ErrReadOnly; the suite stores its objects through
	// the writable bucket the constructor returns beside it.
	ReadOnly bool
	// NoList says the bucket cannot list: List must fail with an error
	// matching errors.ErrUnsupported.
	NoList bool
	// ManyObjects is the number of objects the pagination subtest lists;
	// set it above 1000 where the store pages at 1000 and writes are cheap.
	// Zero means 40.
	ManyObjects int
	// NoKeyUnderKey says the store cannot hold an object "a" together with
	// objects under "a/", because keys map to files and directories (an S3
	// gateway on a POSIX file system, such as versitygw's posix backend).
	// The listing subtest then leaves such pairs out.
	NoKeyUnderKey bool
}

// Run runs the conformance suite on the writable buckets newBucket returns.
// newBucket must return an empty bucket for each call and arrange its own
// cleanup with t.Cleanup; the cleanup must tolerate a bucket the suite has
// already closed.
func Run(t *testing.T, newBucket func(t *testing.T) storage.Bucket) {
	t.Helper()
	RunWith(t, func(t *testing.T) (storage.Bucket, storage.Bucket) {
		b := newBucket(t)
		return b, b
	}, nil)
}

// RunWith runs the conformance suite on the buckets newBucket returns.
// newBucket returns the bucket under test and a writable bucket whose
// objects appear in it (the same bucket unless opts.ReadOnly). opts may be
// nil.
func RunWith(t *testing.T, newBucket func(t *testing.T) (b, writer storage.Bucket), opts *Options) {
	t.Helper()
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.ManyObjects == 0 {
		o.ManyObjects = 40
	}
	s := &suite{newBucket: newBucket, opts: o}
	t.Run("MissingKey", s.testMissingKey)
	t.Run("InvalidKey", s.testInvalidKey)
	t.Run("RoundTrip", s.testRoundTrip)
	t.Run("ReaderInfo", s.testReaderInfo)
	t.Run("EmptyObject", s.testEmptyObject)
	t.Run("RangeEdges", s.testRangeEdges)
	t.Run("OddKeys", s.testOddKeys)
	t.Run("ListOrderAndPrefixes", s.testList)
	t.Run("ListStopsOnError", s.testListStops)
	t.Run("ListPagination", s.testListPagination)
	t.Run("OverwriteAndDelete", s.testOverwriteDelete)
	t.Run("CancelledWrite", s.testCancelledWrite)
	t.Run("FailedWrite", s.testFailedWrite)
	t.Run("ReadOnly", s.testReadOnly)
	t.Run("CancelledContext", s.testCancelledContext)
	t.Run("ConcurrentReaders", s.testConcurrentReaders)
	t.Run("ConcurrentWriters", s.testConcurrentWriters)
	t.Run("Upload", s.testUpload)
	t.Run("Download", s.testDownload)
	t.Run("DownloadAtomic", s.testDownloadAtomic)
	t.Run("Close", s.testClose)
}

type suite struct {
	newBucket func(t *testing.T) (storage.Bucket, storage.Bucket)
	opts      Options
}

// Pattern returns n deterministic bytes that differ per seed, so that a
// read of the wrong range or object is noticed.
func Pattern(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	b := make([]byte, n)
	for i := 0; i < n; i += 8 {
		v := r.Uint64()
		for j := i; j < min(i+8, n); j++ {
			b[j] = byte(v)
			v >>= 8
		}
	}
	return b
}

// Put stores data as key in b through NewWriter and fails t on error.
func Put(t testing.TB, b storage.Bucket, key string, data []byte) {
	t.Helper()
	if _, err := storage.WriteFrom(context.Background(), b, key, bytes.NewReader(data), nil); err != nil {
		t.Fatalf("put %q: %v", key, err)
	}
}

// Get reads the whole object key from b and fails t on error.
func Get(t testing.TB, b storage.Bucket, key string) []byte {
	t.Helper()
	data, err := readRange(context.Background(), b, key, 0, -1)
	if err != nil {
		t.Fatalf("get %q: %v", key, err)
	}
	return data
}

func readRange(ctx context.Context, b storage.Bucket, key string, off, n int64) (data []byte, err error) {
	r, err := b.NewRangeReader(ctx, key, off, n)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, r.Close()) }()
	return io.ReadAll(r)
}

// ListKeys returns the keys List reports under prefix, failing t on error.
func ListKeys(t testing.TB, b storage.Bucket, prefix string) []string {
	t.Helper()
	keys := []string{}
	err := b.List(context.Background(), prefix, func(info storage.ObjectInfo) error {
		keys = append(keys, info.Key)
		return nil
	})
	if err != nil {
		t.Fatalf("list %q: %v", prefix, err)
	}
	return keys
}

func (s *suite) writable(t *testing.T) {
	t.Helper()
	if s.opts.ReadOnly {
		t.Skip("read-only bucket")
	}
}

func (s *suite) listing(t *testing.T) {
	t.Helper()
	if s.opts.NoList {
		t.Skip("bucket cannot list")
	}
}
