package s3store

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	smithyauth "github.com/aws/smithy-go/auth"
)

// TestEndpointParamsKnown: the cache knows every endpoint parameter of the
// SDK in go.mod. An SDK that adds one turns the cache off (New falls back
// to the SDK's resolver); this test says so, so that the key is extended.
func TestEndpointParamsKnown(t *testing.T) {
	if !endpointParamsKnown() {
		tp := reflect.TypeFor[s3.EndpointParameters]()
		for i := range tp.NumField() {
			if _, known := endpointParamKeyed(tp.Field(i).Name); !known {
				t.Errorf("s3.EndpointParameters.%s is not known to the endpoint cache", tp.Field(i).Name)
			}
		}
	}
}

// resolverCases are endpoint parameters as the SDK binds them for Sluice's
// requests and for a few it refuses.
func resolverCases() map[string]s3.EndpointParameters {
	base := func(bucket, region, endpoint string, pathStyle bool) s3.EndpointParameters {
		p := s3.EndpointParameters{
			Bucket:                         aws.String(bucket),
			Region:                         aws.String(region),
			UseFIPS:                        aws.Bool(false),
			UseDualStack:                   aws.Bool(false),
			ForcePathStyle:                 aws.Bool(pathStyle),
			Accelerate:                     aws.Bool(false),
			DisableMultiRegionAccessPoints: aws.Bool(false),
			UseArnRegion:                   aws.Bool(false),
			Key:                            aws.String("shard.00000.mds"),
		}
		if endpoint != "" {
			p.Endpoint = aws.String(endpoint)
		}
		return p
	}
	fips := base("data", "us-west-2", "", false)
	fips.UseFIPS = aws.Bool(true)
	return map[string]s3.EndpointParameters{
		"path-style-http":     base("sluice-test", "us-east-1", "http://127.0.0.1:7070", true),
		"path-style-https":    base("sluice-test", "eu-west-1", "https://minio.example:9000/base", true),
		"virtual-host":        base("sluice-test", "us-east-1", "https://store.example", false),
		"virtual-host-dotted": base("my.bucket", "us-east-1", "https://store.example", false),
		"virtual-host-ip":     base("sluice-test", "us-east-1", "http://127.0.0.1:7070", false),
		"aws":                 base("data", "us-west-2", "", false),
		"aws-fips":            fips,
		"bad-region":          base("data", "not a region", "http://127.0.0.1:7070", true),
		"bad-endpoint":        base("data", "us-east-1", "not a url", true),
		"arn-bucket":          base("arn:aws:s3:us-west-2:123456789012:accesspoint/ap", "us-west-2", "", false),
	}
}

// TestCachedResolverMatchesSDK: for every case the cache answers what the
// SDK's resolver answers, whatever the key, the first time and from the
// cache, and errors where it errs.
func TestCachedResolverMatchesSDK(t *testing.T) {
	ctx := context.Background()
	sdk := s3.NewDefaultEndpointResolverV2()
	for name, p := range resolverCases() {
		t.Run(name, func(t *testing.T) {
			want, wantErr := sdk.ResolveEndpoint(ctx, p)
			c := newCachedResolver(s3.NewDefaultEndpointResolverV2())
			for i, key := range []*string{p.Key, aws.String("other/key"), nil, aws.String("")} {
				q := p
				q.Key = key
				q.Prefix = key
				got, err := c.ResolveEndpoint(ctx, q)
				if (err != nil) != (wantErr != nil) {
					t.Fatalf("call %d: error %v, the SDK's %v", i, err, wantErr)
				}
				if err != nil {
					continue
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("call %d: %+v, the SDK answers %+v", i, got, want)
				}
			}
			if wantErr == nil && len(c.seen) != 1 {
				t.Fatalf("%d answers cached, want 1", len(c.seen))
			}
		})
	}
}

// TestCachedResolverParamsMatter: parameters other than the key reach the
// SDK's resolver: path style and region change the answer.
func TestCachedResolverParamsMatter(t *testing.T) {
	ctx := context.Background()
	c := newCachedResolver(s3.NewDefaultEndpointResolverV2())
	p := resolverCases()["path-style-https"]
	a, err := c.ResolveEndpoint(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	p.ForcePathStyle = aws.Bool(false)
	b, err := c.ResolveEndpoint(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if a.URI.String() == b.URI.String() {
		t.Fatalf("path style and virtual host both resolve to %s", a.URI.String())
	}
	p.Region = aws.String("ap-south-1")
	r, err := c.ResolveEndpoint(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if reflect.DeepEqual(r, b) {
		t.Fatal("a new region resolved to the old region's endpoint")
	}
}

// TestCachedResolverCopies: what one request does to its endpoint (the SDK
// renames and rebases auth options in place, sets signer properties) does
// not reach the next request's, also from many goroutines at once (run
// with -race).
func TestCachedResolverCopies(t *testing.T) {
	ctx := context.Background()
	p := resolverCases()["path-style-http"]
	want, err := s3.NewDefaultEndpointResolverV2().ResolveEndpoint(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	c := newCachedResolver(s3.NewDefaultEndpointResolverV2())
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				e, err := c.ResolveEndpoint(ctx, p)
				if err != nil {
					errs <- err.Error()
					return
				}
				if !reflect.DeepEqual(e, want) {
					errs <- "endpoint changed by an earlier request"
					return
				}
				e.URI.Path += "/x"
				if e.Headers == nil {
					e.Headers = map[string][]string{}
				}
				e.Headers.Set("X-Test", strconv.Itoa(i))
				opts, _ := smithyauth.GetAuthOptions(&e.Properties)
				for _, o := range opts {
					o.SchemeID = "changed"
					o.SignerProperties.Set("signing-region", strconv.Itoa(g))
					o.IdentityProperties.Set("x", i)
				}
				e.Properties.Set("backend", "changed")
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// TestCachedResolverBounded: past maxCachedEndpoints buckets answers are
// still right and the cache stops growing.
func TestCachedResolverBounded(t *testing.T) {
	ctx := context.Background()
	c := newCachedResolver(s3.NewDefaultEndpointResolverV2())
	sdk := s3.NewDefaultEndpointResolverV2()
	p := resolverCases()["path-style-http"]
	for i := range maxCachedEndpoints + 10 {
		p.Bucket = aws.String("bucket-" + strconv.Itoa(i))
		got, err := c.ResolveEndpoint(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := sdk.ResolveEndpoint(ctx, p)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("bucket %d: %v, want %v", i, got.URI.String(), want.URI.String())
		}
	}
	if len(c.seen) != maxCachedEndpoints {
		t.Fatalf("%d answers cached, want %d", len(c.seen), maxCachedEndpoints)
	}
}

// TestNewCachesOnlyCustomEndpoints: a Bucket on a custom endpoint resolves
// through the cache; one on AWS keeps the SDK's resolver. Neither sends a
// request (the region is given).
func TestNewCachesOnlyCustomEndpoints(t *testing.T) {
	withoutAWSConfig(t)
	creds := credentials.NewStaticCredentialsProvider("a", "b", "")
	resolverOf := func(endpoint string) s3.EndpointResolverV2 {
		b, err := New(context.Background(), "data", "", &Options{Region: "us-east-1", Endpoint: endpoint, Credentials: creds})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		return b.Client().Options().EndpointResolverV2
	}
	if _, ok := resolverOf("http://127.0.0.1:1").(*cachedResolver); !ok {
		t.Error("a custom endpoint does not resolve through the cache")
	}
	want := reflect.TypeOf(s3.NewDefaultEndpointResolverV2())
	if r := resolverOf(""); reflect.TypeOf(r) != want {
		t.Errorf("AWS resolves through %T, want the SDK's resolver %v", r, want)
	}
}

// TestFullObjectUploadsOnAWSOnly: multipart uploads ask for a full-object
// checksum on AWS, and not on other endpoints (MinIO, for one, refuses
// FULL_OBJECT with CRC32).
func TestFullObjectUploadsOnAWSOnly(t *testing.T) {
	withoutAWSConfig(t)
	creds := credentials.NewStaticCredentialsProvider("a", "b", "")
	for endpoint, want := range map[string]bool{"": true, "http://127.0.0.1:1": false} {
		b, err := New(context.Background(), "data", "", &Options{Region: "us-east-1", Endpoint: endpoint, Credentials: creds})
		if err != nil {
			t.Fatal(err)
		}
		if b.fullObject != want {
			t.Errorf("endpoint %q: full-object uploads %v, want %v", endpoint, b.fullObject, want)
		}
		b.Close()
	}
	// An endpoint in the AWS configuration file is not AWS either.
	config := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(config, []byte("[default]\nendpoint_url = http://127.0.0.1:1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_CONFIG_FILE", config)
	b, err := New(context.Background(), "data", "", &Options{Region: "us-east-1", Credentials: creds})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.fullObject {
		t.Errorf("endpoint_url in the AWS configuration file: full-object uploads on, want off")
	}
}

// withoutAWSConfig clears, for the rest of t, the endpoint variables and
// the AWS configuration files and instance metadata that New would read.
func withoutAWSConfig(t *testing.T) {
	for _, name := range []string{"S3_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_PROFILE"} {
		t.Setenv(name, "")
	}
	t.Setenv("AWS_CONFIG_FILE", os.DevNull)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", os.DevNull)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}
