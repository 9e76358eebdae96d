package gcsstore_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/sluicedata/sluice/internal/s3test"
	"github.com/sluicedata/sluice/internal/stores"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/gcsstore"
	"github.com/sluicedata/sluice/storage/storagetest"
)

// The HMAC tests use the S3 server of .ci/services.sh (versitygw) as "the
// GCS XML endpoint", its keys as GCS_KEY and GCS_SECRET: the requests are
// the SigV4 requests GCS's XML API takes.

// hmacURL is gs://BUCKET/PREFIX naming the S3 server as the XML endpoint
// (and its region: versitygw checks the region of the signature, GCS
// takes "auto").
func hmacURL(s s3test.Server, prefix string) string {
	return "gs://" + s.Bucket + "/" + prefix + "?" + url.Values{"endpoint": {s.Endpoint}, "region": {s.Region}}.Encode()
}

// setHMACEnv sets GCS_KEY and GCS_SECRET, and leaves no AWS keys around
// that could be used instead.
func setHMACEnv(t *testing.T, key, secret string) {
	t.Setenv("GCS_KEY", key)
	t.Setenv("GCS_SECRET", secret)
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

// TestHMACConformance runs the storage conformance suite on gs:// URLs
// opened through the default registry (so with the retry and limit
// decorators) with GCS_KEY and GCS_SECRET set.
func TestHMACConformance(t *testing.T) {
	s := s3test.Require(t)
	setHMACEnv(t, s.AccessKey, s.SecretKey)
	reg := stores.Default()
	storagetest.Run(t, func(t *testing.T) storage.Bucket {
		prefix := s3test.NewPrefix("gcs-hmac")
		s.Open(t, prefix) // deletes what the test leaves
		b, err := stores.Open(context.Background(), reg, hmacURL(s, prefix), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	})
}

// TestOpenHMACPrecedence: gs:// takes the XML API with the HMAC keys when
// GCS_KEY and GCS_SECRET are both set (as MosaicML Streaming does), names
// the object gs://, and says which key a refused request used without
// showing the secret; with only one of them set, the JSON API is used.
func TestOpenHMACPrecedence(t *testing.T) {
	s := s3test.Require(t)
	ctx := context.Background()
	prefix := s3test.NewPrefix("gcs-hmac-open")
	direct := s.Open(t, prefix)
	want := []byte("shard bytes through the XML API")
	if err := storage.Upload(ctx, direct, "shard.00000.mds", bytes.NewReader(want), int64(len(want)), nil); err != nil {
		t.Fatal(err)
	}
	// A credentials file of the environment does not win over the keys.
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", "/nonexistent/credentials.json")
	setHMACEnv(t, s.AccessKey, s.SecretKey)
	reg := stores.Default()
	b, err := stores.Open(ctx, reg, hmacURL(s, prefix), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	r, err := b.NewRangeReader(ctx, "shard.00000.mds", 0, -1)
	if err != nil {
		t.Fatalf("read with GCS_KEY and GCS_SECRET: %v", err)
	}
	got, err := io.ReadAll(r)
	r.Close()
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read %q, %v; want %q", got, err, want)
	}
	if u, w := b.URL("shard.00000.mds"), "gs://"+s.Bucket+"/"+prefix+"/shard.00000.mds"; u != w {
		t.Errorf("URL = %s, want %s", u, w)
	}

	// A wrong secret: refused, naming the bucket and the key's source.
	const badSecret = "not-the-secret-0123456789"
	setHMACEnv(t, s.AccessKey, badSecret)
	bad, err := stores.Open(ctx, reg, hmacURL(s, prefix), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	_, err = bad.Stat(ctx, "shard.00000.mds")
	if !errors.Is(err, storage.ErrPermission) {
		t.Fatalf("stat with a wrong secret: %v, want ErrPermission", err)
	}
	t.Logf("wrong secret: %v", err)
	for _, w := range []string{"gs://" + s.Bucket, "GCS_KEY and GCS_SECRET", "HMAC"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
	if strings.Contains(err.Error(), badSecret) {
		t.Errorf("error %q shows the secret", err)
	}

	// Only GCS_KEY: not HMAC; the JSON API (here an endpoint that refuses
	// connections) is asked instead.
	t.Setenv("GCS_SECRET", "")
	os.Unsetenv("GCS_SECRET")
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", "")
	nj, err := gcsstore.Open(ctx, &url.URL{Scheme: "gs", Host: s.Bucket, Path: "/" + prefix, RawQuery: "endpoint=http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	defer nj.Close()
	if _, ok := nj.(*gcsstore.Bucket); !ok {
		t.Fatalf("with GCS_KEY alone Open gave a %T, want the JSON API's *gcsstore.Bucket", nj)
	}
}

// TestNewHMACRefusesOtherCredentials: HMAC keys with another way of
// authenticating is a mistake, reported instead of picking one.
func TestNewHMACRefusesOtherCredentials(t *testing.T) {
	ctx := context.Background()
	for _, o := range []gcsstore.Options{
		{HMACKey: "k", HMACSecret: "s", Anonymous: true},
		{HMACKey: "k", HMACSecret: "s", CredentialsFile: "/x.json"},
		{HMACKey: "k"},
	} {
		if b, err := gcsstore.NewStore(ctx, "bkt", "p", &o); err == nil || !strings.Contains(err.Error(), "gs://bkt") {
			if b != nil {
				b.Close()
			}
			t.Errorf("NewStore(%+v) = %v, want an error naming gs://bkt", o, err)
		}
	}
	if _, err := gcsstore.New(ctx, "bkt", "p", &gcsstore.Options{HMACKey: "k", HMACSecret: "s"}); err == nil {
		t.Error("New took HMAC keys it cannot use")
	}
}
