package s3store_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/smithy-go"

	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/s3store"
	"github.com/sluicedata/sluice/storage/storagetest"
)

// server describes the S3 server the tests use (versitygw in CI, started by
// .ci/services.sh).
type server struct {
	endpoint, bucket, region, access, secret string
}

// testServer returns the server from SLUICE_TEST_S3_*, or skips the test
// when it is not configured (fails instead under SLUICE_REQUIRE_SERVICES=1).
func testServer(t testing.TB) server {
	t.Helper()
	s := server{
		endpoint: os.Getenv("SLUICE_TEST_S3_ENDPOINT"),
		bucket:   os.Getenv("SLUICE_TEST_S3_BUCKET"),
		region:   os.Getenv("SLUICE_TEST_S3_REGION"),
		access:   os.Getenv("SLUICE_TEST_S3_ACCESS_KEY"),
		secret:   os.Getenv("SLUICE_TEST_S3_SECRET_KEY"),
	}
	if s.endpoint == "" || s.bucket == "" || s.access == "" || s.secret == "" {
		const why = "no S3 server: set SLUICE_TEST_S3_ENDPOINT, _BUCKET, _ACCESS_KEY and _SECRET_KEY (or run under .ci/with-services.sh)"
		if os.Getenv("SLUICE_REQUIRE_SERVICES") == "1" {
			t.Fatal(why + " — required because SLUICE_REQUIRE_SERVICES=1")
		}
		t.Skip(why)
	}
	// Nothing in these tests may look for credentials on the network.
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	return s
}

// uniquePrefix returns a fresh key prefix, so that tests sharing the bucket
// never see each other's objects.
func uniquePrefix(t testing.TB) string {
	var r [6]byte
	rand.Read(r[:])
	name := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	return "test/" + name + "-" + hex.EncodeToString(r[:])
}

func (s server) options() *s3store.Options {
	return &s3store.Options{
		Endpoint:    s.endpoint,
		Region:      s.region,
		Credentials: credentials.NewStaticCredentialsProvider(s.access, s.secret, ""),
	}
}

// newBucket opens an empty Bucket under a fresh prefix and deletes what the
// test left there afterwards.
func newBucket(t testing.TB, s server) *s3store.Bucket {
	t.Helper()
	prefix := uniquePrefix(t)
	opts := s.options()
	// Small pages, so that every listing test crosses page boundaries
	// (S3 pages at 1000 otherwise, which would take thousands of objects).
	opts.ListPageSize = 7
	b, err := s3store.New(context.Background(), s.bucket, prefix, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The test may have closed b: clean up through a second Bucket.
		c, err := s3store.New(context.Background(), s.bucket, prefix, s.options())
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
	storagetest.RunWith(t, func(t *testing.T) (storage.Bucket, storage.Bucket) {
		b := newBucket(t, s)
		return b, b
	}, &storagetest.Options{
		// versitygw's posix backend keeps "a" as a file and "a/b" inside a
		// directory "a", so it cannot hold both.
		NoKeyUnderKey: true,
	})
}

func TestOpenURLFromEnvironment(t *testing.T) {
	s := testServer(t)
	// The credential chain and an endpoint as a user would set them: the
	// variable MosaicML reads, or endpoint_url in the AWS configuration
	// file (whose store is not AWS either: path-style requests, no
	// region of its own). No region, so it is discovered from the server.
	for _, tc := range []struct{ name, envEndpoint, config string }{
		{"S3_ENDPOINT_URL", s.endpoint, os.DevNull},
		{"config-file", "", "[default]\nendpoint_url = " + strings.Replace(s.endpoint, "127.0.0.1", "localhost", 1) + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("AWS_ACCESS_KEY_ID", s.access)
			t.Setenv("AWS_SECRET_ACCESS_KEY", s.secret)
			t.Setenv("AWS_SESSION_TOKEN", "")
			t.Setenv("AWS_REGION", "")
			t.Setenv("AWS_DEFAULT_REGION", "")
			t.Setenv("AWS_PROFILE", "")
			config := tc.config
			if config != os.DevNull {
				config = filepath.Join(t.TempDir(), "config")
				if err := os.WriteFile(config, []byte(tc.config), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			t.Setenv("AWS_CONFIG_FILE", config)
			t.Setenv("AWS_SHARED_CREDENTIALS_FILE", os.DevNull)
			t.Setenv("AWS_ENDPOINT_URL", "")
			t.Setenv("AWS_ENDPOINT_URL_S3", "")
			t.Setenv("S3_ENDPOINT_URL", tc.envEndpoint)

			prefix := uniquePrefix(t)
			u, err := url.Parse("s3://" + s.bucket + "/" + prefix)
			if err != nil {
				t.Fatal(err)
			}
			b, err := s3store.Open(t.Context(), u)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if s.region != "" {
				if got := b.(*s3store.Bucket).Region(); got != s.region {
					t.Errorf("discovered region %q, want the server's %q", got, s.region)
				}
			}
			data := storagetest.Pattern(1, 1000)
			storagetest.Put(t, b, "a/b.bin", data)
			t.Cleanup(func() { b.Delete(context.Background(), "a/b.bin") })
			if got := storagetest.Get(t, b, "a/b.bin"); !bytes.Equal(got, data) {
				t.Errorf("read back %d bytes, want the %d written", len(got), len(data))
			}
			if got, want := b.URL("a/b.bin"), "s3://"+s.bucket+"/"+prefix+"/a/b.bin"; got != want {
				t.Errorf("URL = %q, want %q", got, want)
			}
		})
	}
}

func TestOpenURLOptions(t *testing.T) {
	for _, tc := range []struct {
		url, wantErr string
	}{
		{"s3:///prefix", "no bucket name"},
		{"s3://b/p?colour=blue", `unknown option "colour"`},
		{"s3://b/p?requester_pays=maybe", "want true or false"},
		{"s3://b/p?endpoint=ftp://host", "want http(s)://host"},
		{"s3://b/p/../q?region=us-east-1", "invalid key"},
		{"gs://b/p", "scheme is not s3"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
			u, err := url.Parse(tc.url)
			if err != nil {
				t.Fatal(err)
			}
			_, err = s3store.Open(t.Context(), u)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Open(%s) = %v, want an error containing %q", tc.url, err, tc.wantErr)
			}
		})
	}
}

func TestPermissionDeniedNamesCredentials(t *testing.T) {
	s := testServer(t)
	for _, tc := range []struct {
		name, access, secret, wantKey string
	}{
		{"unknown access key", "AKIAWRONGKEY0000", "not-the-secret", "AKIA…0000"},
		{"wrong secret", s.access, "not-the-secret", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := s.options()
			opts.Credentials = credentials.NewStaticCredentialsProvider(tc.access, tc.secret, "")
			b, err := s3store.New(t.Context(), s.bucket, uniquePrefix(t), opts)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			_, err = b.NewRangeReader(t.Context(), "x", 0, -1)
			if !errors.Is(err, storage.ErrPermission) || errors.Is(err, storage.ErrNotExist) {
				t.Fatalf("get with bad credentials = %v, want ErrPermission (only)", err)
			}
			if storage.IsRetryable(err) {
				t.Errorf("IsRetryable(%v) = true, want false", err)
			}
			msg := err.Error()
			for _, want := range []string{tc.wantKey, "StaticCredentials", s.bucket, s.endpoint} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not mention %q", msg, want)
				}
			}
			var he *storage.HTTPError
			if !errors.As(err, &he) || he.StatusCode != 403 {
				t.Errorf("error %v is not a *storage.HTTPError with status 403", err)
			}
			var apiErr smithy.APIError
			if !errors.As(err, &apiErr) {
				t.Errorf("errors.As(%v, smithy.APIError) = false, want the SDK error kept", err)
			}
		})
	}
}

func TestMissing(t *testing.T) {
	s := testServer(t)
	b := newBucket(t, s)
	_, err := b.NewRangeReader(t.Context(), "no/such/key", 0, -1)
	if !errors.Is(err, storage.ErrNotExist) {
		t.Fatalf("get of a missing key = %v, want ErrNotExist", err)
	}
	if !strings.Contains(err.Error(), b.URL("no/such/key")) {
		t.Errorf("error %q does not name %s", err, b.URL("no/such/key"))
	}

	nb, err := s3store.New(t.Context(), "sluice-no-such-bucket", "", s.options())
	if err != nil {
		t.Fatal(err)
	}
	defer nb.Close()
	err = nb.List(t.Context(), "", func(storage.ObjectInfo) error { return nil })
	if !errors.Is(err, storage.ErrNotExist) || !strings.Contains(err.Error(), `bucket "sluice-no-such-bucket" does not exist`) {
		t.Errorf("list of a missing bucket = %v, want ErrNotExist naming the bucket", err)
	}
}

// TestMultipart writes objects larger than the part size through both
// write paths and checks that they went up in parts (S3 marks a multipart
// object's ETag with "-<parts>").
func TestMultipart(t *testing.T) {
	s := testServer(t)
	b := newBucket(t, s)
	ctx := t.Context()
	data := storagetest.Pattern(7, 11<<20+123) // three 5 MiB parts
	opts := &storage.WriteOptions{PartSize: 5 << 20, Concurrency: 2}

	w, err := b.NewWriter(ctx, "streamed", opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Upload(ctx, "from-readerat", bytes.NewReader(data), int64(len(data)), opts); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"streamed", "from-readerat"} {
		info, err := b.Stat(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if info.Size != int64(len(data)) || !strings.HasSuffix(strings.Trim(info.ETag, `"`), "-3") {
			t.Errorf("%s: size %d etag %s, want size %d and a 3-part ETag", key, info.Size, info.ETag, len(data))
		}
		if got := storagetest.Get(t, b, key); !bytes.Equal(got, data) {
			t.Errorf("%s: read back differs from what was written", key)
		}
	}
}

// TestRequesterPays checks that the option reaches the request: versitygw
// accepts the header, so the round trip must still work.
func TestRequesterPays(t *testing.T) {
	s := testServer(t)
	opts := s.options()
	opts.RequesterPays = true
	b, err := s3store.New(t.Context(), s.bucket, uniquePrefix(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	storagetest.Put(t, b, "k", []byte("paid"))
	defer b.Delete(context.Background(), "k")
	if got := storagetest.Get(t, b, "k"); string(got) != "paid" {
		t.Errorf("read %q, want %q", got, "paid")
	}
}

// TestWrongRegion checks that a request signed for another region than the
// bucket's fails at once with a message that says so.
func TestWrongRegion(t *testing.T) {
	s := testServer(t)
	if s.region == "" || s.region == "us-west-2" {
		t.Skip("the server's region is not known to differ from us-west-2")
	}
	opts := s.options()
	opts.Region = "us-west-2"
	b, err := s3store.New(t.Context(), s.bucket, uniquePrefix(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	// A GET: the answer to a HEAD has no body to say what went wrong.
	_, err = b.NewRangeReader(t.Context(), "x", 0, -1)
	if err == nil {
		t.Fatal("a get signed for the wrong region succeeded")
	}
	t.Logf("error: %v", err)
	if storage.IsRetryable(err) {
		t.Errorf("IsRetryable(%v) = true, want false", err)
	}
	if !strings.Contains(err.Error(), "us-west-2") {
		t.Errorf("error %q does not name the region used", err)
	}
}
