package gcsstore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"os"
	"strings"
	"testing"

	gcs "cloud.google.com/go/storage"

	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/gcsstore"
	"github.com/sluicedata/sluice/storage/storagetest"
)

// server describes the GCS emulator the tests use (fake-gcs-server in CI,
// started by .ci/services.sh).
type server struct{ endpoint, bucket string }

// testServer returns the server from SLUICE_TEST_GCS_*, or skips the test
// when it is not configured (fails instead under SLUICE_REQUIRE_SERVICES=1).
func testServer(t testing.TB) server {
	t.Helper()
	s := server{endpoint: os.Getenv("SLUICE_TEST_GCS_ENDPOINT"), bucket: os.Getenv("SLUICE_TEST_GCS_BUCKET")}
	if s.endpoint == "" || s.bucket == "" {
		const why = "no GCS emulator: set SLUICE_TEST_GCS_ENDPOINT and SLUICE_TEST_GCS_BUCKET (or run under .ci/with-services.sh)"
		if os.Getenv("SLUICE_REQUIRE_SERVICES") == "1" {
			t.Fatal(why + " — required because SLUICE_REQUIRE_SERVICES=1")
		}
		t.Skip(why)
	}
	// Nothing may look for Google credentials on the network.
	t.Setenv("GCE_METADATA_HOST", "127.0.0.1:1")
	return s
}

func uniquePrefix(t testing.TB) string {
	var r [6]byte
	rand.Read(r[:])
	name := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	return "test/" + name + "-" + hex.EncodeToString(r[:])
}

func newBucket(t testing.TB, s server) *gcsstore.Bucket {
	t.Helper()
	prefix := uniquePrefix(t)
	// Small pages, so that listing tests cross page boundaries.
	opts := &gcsstore.Options{Endpoint: s.endpoint, ListPageSize: 7}
	b, err := gcsstore.New(context.Background(), s.bucket, prefix, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := gcsstore.New(context.Background(), s.bucket, prefix, opts)
		if err != nil {
			t.Errorf("cleanup: %v", err)
			return
		}
		defer c.Close()
		ctx := context.Background()
		var keys []string
		if err := c.List(ctx, "", func(o storage.ObjectInfo) error {
			keys = append(keys, o.Key)
			return nil
		}); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		for _, k := range keys {
			if err := c.Delete(ctx, k); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
		b.Close()
	})
	return b
}

func TestConformance(t *testing.T) {
	s := testServer(t)
	storagetest.Run(t, func(t *testing.T) storage.Bucket { return newBucket(t, s) })
}

// TestOpenEmulatorHost opens a gs:// URL the way a user pointing at an
// emulator would: STORAGE_EMULATOR_HOST, nothing else.
func TestOpenEmulatorHost(t *testing.T) {
	s := testServer(t)
	t.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(s.endpoint, "http://"))
	prefix := uniquePrefix(t)
	u, err := url.Parse("gs://" + s.bucket + "/" + prefix)
	if err != nil {
		t.Fatal(err)
	}
	b, err := gcsstore.Open(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	data := storagetest.Pattern(3, 5000)
	storagetest.Put(t, b, "x/y.bin", data)
	defer b.Delete(context.Background(), "x/y.bin")
	if got := storagetest.Get(t, b, "x/y.bin"); !bytes.Equal(got, data) {
		t.Errorf("read back %d bytes, want the %d written", len(got), len(data))
	}
	if got, want := b.URL("x/y.bin"), "gs://"+s.bucket+"/"+prefix+"/x/y.bin"; got != want {
		t.Errorf("URL = %q, want %q", got, want)
	}
}

func TestOpenURLOptions(t *testing.T) {
	for _, tc := range []struct{ url, wantErr string }{
		{"gs:///prefix", "no bucket name"},
		{"gs://b/p?colour=blue", `unknown option "colour"`},
		{"gs://b/p?anonymous=maybe", "want true or false"},
		{"gs://b/p?endpoint=ftp://h", "want http(s)://host"},
		{"gs://b/a/../b?endpoint=http://127.0.0.1:1", "invalid key"},
		{"s3://b/p", "scheme is not gs"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			u, err := url.Parse(tc.url)
			if err != nil {
				t.Fatal(err)
			}
			_, err = gcsstore.Open(t.Context(), u)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Open(%s) = %v, want an error containing %q", tc.url, err, tc.wantErr)
			}
		})
	}
}

func TestMissing(t *testing.T) {
	s := testServer(t)
	b := newBucket(t, s)
	_, err := b.NewRangeReader(t.Context(), "no/such/key", 0, -1)
	if !errors.Is(err, storage.ErrNotExist) || !errors.Is(err, gcs.ErrObjectNotExist) {
		t.Fatalf("get of a missing key = %v, want ErrNotExist wrapping the library's ErrObjectNotExist", err)
	}
	if storage.IsRetryable(err) {
		t.Errorf("IsRetryable(%v) = true", err)
	}
	nb, err := gcsstore.New(t.Context(), "sluice-no-such-bucket", "", &gcsstore.Options{Endpoint: s.endpoint})
	if err != nil {
		t.Fatal(err)
	}
	defer nb.Close()
	err = nb.List(t.Context(), "", func(storage.ObjectInfo) error { return nil })
	if !errors.Is(err, storage.ErrNotExist) {
		t.Errorf("list of a missing bucket = %v, want ErrNotExist", err)
	}
}

// TestChunkedUpload writes an object larger than the chunk size, so the
// resumable upload sends several chunks.
func TestChunkedUpload(t *testing.T) {
	s := testServer(t)
	b := newBucket(t, s)
	data := storagetest.Pattern(9, 3<<20+17)
	w, err := b.NewWriter(t.Context(), "big", &storage.WriteOptions{PartSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got := storagetest.Get(t, b, "big"); !bytes.Equal(got, data) {
		t.Errorf("read back %d bytes, want the %d written", len(got), len(data))
	}
}

// BenchmarkBucket runs the shared storage benchmarks on the emulator.
func BenchmarkBucket(b *testing.B) {
	s := testServer(b)
	storagetest.RunBenchmarks(b, newBucket(b, s))
}
