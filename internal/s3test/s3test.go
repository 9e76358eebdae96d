// Package s3test connects tests to the real S3 server that .ci/services.sh
// starts on 127.0.0.1 and describes in the SLUICE_TEST_S3_* variables.
//
// Without those variables a test that needs the server is skipped, unless
// SLUICE_REQUIRE_SERVICES=1 (set by .ci/test.sh), where it fails: CI must
// never pass by skipping the server-backed tests.
package s3test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/s3store"
)

// Server is the S3 server under test.
type Server struct {
	Endpoint  string // http://127.0.0.1:port
	Bucket    string // an existing bucket
	Region    string // us-east-1 unless SLUICE_TEST_S3_REGION says otherwise
	AccessKey string
	SecretKey string
}

// Require returns the server named by SLUICE_TEST_S3_*, or skips tb
// (fails it under SLUICE_REQUIRE_SERVICES=1) when there is none.
func Require(tb testing.TB) Server {
	tb.Helper()
	s := Server{
		Endpoint:  os.Getenv("SLUICE_TEST_S3_ENDPOINT"),
		Bucket:    os.Getenv("SLUICE_TEST_S3_BUCKET"),
		Region:    os.Getenv("SLUICE_TEST_S3_REGION"),
		AccessKey: os.Getenv("SLUICE_TEST_S3_ACCESS_KEY"),
		SecretKey: os.Getenv("SLUICE_TEST_S3_SECRET_KEY"),
	}
	if s.Region == "" {
		s.Region = "us-east-1"
	}
	if s.Endpoint == "" || s.Bucket == "" || s.AccessKey == "" || s.SecretKey == "" {
		const why = "no S3 server: set SLUICE_TEST_S3_* (or run under .ci/with-services.sh)"
		if os.Getenv("SLUICE_REQUIRE_SERVICES") == "1" {
			tb.Fatal(why + " — required because SLUICE_REQUIRE_SERVICES=1")
		}
		tb.Skip(why)
	}
	return s
}

// SetCredentialEnv points the AWS default credential chain of this
// process at the server's keys (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
// and no instance metadata lookups) for the rest of t.
func (s Server) SetCredentialEnv(t *testing.T) {
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_ACCESS_KEY_ID", s.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s.SecretKey)
}

// NewPrefix returns a key prefix no other test uses: test/NAME-RANDOM.
func NewPrefix(name string) string {
	var b [6]byte
	rand.Read(b[:])
	return "test/" + name + "-" + hex.EncodeToString(b[:])
}

// Open opens the server's bucket under prefix with its static keys. The
// objects written under prefix are deleted and the bucket closed when tb
// ends.
func (s Server) Open(tb testing.TB, prefix string) *s3store.Bucket {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := s3store.New(ctx, s.Bucket, prefix, &s3store.Options{Endpoint: s.Endpoint, Region: s.Region,
		Credentials: credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, "")})
	if err != nil {
		tb.Fatalf("open s3://%s/%s at %s: %v", s.Bucket, prefix, s.Endpoint, err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var keys []string
		b.List(ctx, "", func(o storage.ObjectInfo) error { keys = append(keys, o.Key); return nil })
		for _, k := range keys {
			b.Delete(ctx, k)
		}
		b.Close()
	})
	return b
}

// URL returns the s3:// URL of prefix reached through endpoint (the
// server's own, or a proxy in front of it), with the region.
func (s Server) URL(endpoint, prefix string) string {
	q := url.Values{"endpoint": {endpoint}, "region": {s.Region}}
	return "s3://" + s.Bucket + "/" + prefix + "?" + q.Encode()
}

// UploadDir uploads every regular file of dir to b under its base name
// and returns the names, in directory order.
func UploadDir(tb testing.TB, b storage.Bucket, dir string) []string {
	tb.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var names []string
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		if err := storage.UploadFile(ctx, b, e.Name(), filepath.Join(dir, e.Name()), nil); err != nil {
			tb.Fatalf("upload %s: %v", e.Name(), err)
		}
		names = append(names, e.Name())
	}
	return names
}
