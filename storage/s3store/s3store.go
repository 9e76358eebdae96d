//lint:file-ignore SA1019 feature/s3/manager.Uploader still works; moving to feature/s3/transfermanager is a separate change.

package s3store

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/s3/manager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go/logging"

	"github.com/sluicedata/sluice/storage"
)

// Defaults for uploads.
const (
	// DefaultPartSize is the multipart part size used when
	// WriteOptions.PartSize is zero. Each writer buffers up to
	// (Concurrency+1) parts in memory.
	DefaultPartSize = 16 << 20
	// DefaultConcurrency is the number of parts uploaded at once when
	// WriteOptions.Concurrency is zero.
	DefaultConcurrency = 4
	// maxIdleConnsPerHost keeps connections to the store reusable under the
	// parallel downloads Sluice does (the SDK's default is 10).
	maxIdleConnsPerHost = 256
)

// Options configures a Bucket. The zero value uses the AWS defaults and the
// environment, as described in the package documentation.
type Options struct {
	// Region is the bucket's region. Empty means the configured region
	// (AWS_REGION, profile), else the region the store reports for the
	// bucket (HeadBucket), else us-east-1 for a custom endpoint.
	Region string
	// Endpoint is a custom endpoint URL ("http://127.0.0.1:7070"). Empty
	// means S3_ENDPOINT_URL, AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL, else
	// AWS itself.
	Endpoint string
	// VirtualHostStyle keeps virtual-hosted-style addressing with a custom
	// endpoint (path style is used by default there).
	VirtualHostStyle bool
	// Profile selects a shared-config profile; empty means AWS_PROFILE or
	// "default".
	Profile string
	// SharedConfigFiles and SharedCredentialsFiles replace the shared
	// config and credentials files the SDK reads (AWS_CONFIG_FILE,
	// AWS_SHARED_CREDENTIALS_FILE, else ~/.aws/config and
	// ~/.aws/credentials) when not empty.
	SharedConfigFiles, SharedCredentialsFiles []string
	// RequesterPays makes the requester pay for requests and transfer.
	RequesterPays bool
	// Anonymous sends unsigned requests (public buckets).
	Anonymous bool
	// Credentials, when non-nil, replaces the default credential chain
	// (tests use static credentials).
	Credentials aws.CredentialsProvider
	// HTTPClient, when non-nil, replaces the SDK's HTTP client.
	HTTPClient *http.Client
	// ListPageSize is the number of keys asked for per ListObjectsV2
	// request; zero means the store's maximum (1000 on S3).
	ListPageSize int32
	// URLScheme names the store in URLs and messages ("gs" for Google
	// Cloud Storage read through its S3-compatible XML API with HMAC
	// keys); empty means "s3".
	URLScheme string
}

// Bucket is a storage.Bucket on one S3 bucket and key prefix. It is safe for
// concurrent use.
type Bucket struct {
	client        *s3.Client
	uploader      *manager.Uploader
	creds         aws.CredentialsProvider
	name          string // bucket name
	root          string // key prefix, "" or ending in "/"
	region        string
	endpoint      string // custom endpoint, "" for AWS
	requesterPays bool
	listPageSize  int32
	scheme        string // URL scheme, "s3" unless Options.URLScheme
	// verify checks whole-object GETs against the store's checksum
	// (verify.go); the SDK's own check is then off.
	verify bool
	// fullObject asks multipart uploads with a CRC for a checksum of the
	// whole object (write.go): on AWS only, where it is supported (MinIO,
	// for one, refuses it).
	fullObject bool
	closed     atomic.Bool
}

var (
	_ storage.Bucket   = (*Bucket)(nil)
	_ storage.Uploader = (*Bucket)(nil)
)

// Open opens the Bucket named by an s3:// URL (see the package
// documentation for its options). It matches storage.Opener.
func Open(ctx context.Context, u *url.URL) (storage.Bucket, error) {
	if u.Scheme != "s3" {
		return nil, fmt.Errorf("s3store: open %s: scheme is not s3", u.Redacted())
	}
	opts, err := optionsFromQuery(u.Query())
	if err != nil {
		return nil, fmt.Errorf("s3store: open %s: %w", storage.RedactURL(u.String()), err)
	}
	b, err := New(ctx, u.Host, u.Path, opts)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// optionsFromQuery reads the URL query options of the package doc.
func optionsFromQuery(q url.Values) (*Options, error) {
	opts := &Options{}
	if err := opts.ApplyQuery(q); err != nil {
		return nil, err
	}
	return opts, nil
}

// ApplyQuery sets the options an s3:// URL's query names (region,
// endpoint, profile, requester_pays, anonymous, virtual_host; see the
// package doc) on o, over what o already holds. An unknown option or a
// flag that is not true/false is an error.
func (o *Options) ApplyQuery(q url.Values) error {
	for k, vs := range q {
		v := vs[len(vs)-1]
		var err error
		switch k {
		case "region":
			o.Region = v
		case "endpoint":
			o.Endpoint = v
		case "profile":
			o.Profile = v
		case "requester_pays":
			o.RequesterPays, err = strconv.ParseBool(v)
		case "anonymous":
			o.Anonymous, err = strconv.ParseBool(v)
		case "virtual_host":
			o.VirtualHostStyle, err = strconv.ParseBool(v)
		default:
			return fmt.Errorf("unknown option %q (known: region, endpoint, profile, requester_pays, anonymous, virtual_host)", k)
		}
		if err != nil {
			return fmt.Errorf("option %s=%q: want true or false", k, v)
		}
	}
	return nil
}

// New returns a Bucket on bucket with keys under prefix. It loads the AWS
// configuration (environment, shared files) and, when no region is
// configured, asks the store for the bucket's region with one HeadBucket
// request. opts may be nil.
func New(ctx context.Context, bucket, prefix string, opts *Options) (*Bucket, error) {
	if opts == nil {
		opts = &Options{}
	}
	if bucket == "" {
		return nil, errors.New("s3store: no bucket name (want s3://BUCKET/PREFIX)")
	}
	root := strings.Trim(prefix, "/")
	if root != "" {
		if err := storage.ValidateKey(root); err != nil {
			return nil, fmt.Errorf("s3store: prefix of s3://%s/%s: %w", bucket, root, err)
		}
		root += "/"
	}

	var loadOpts []func(*config.LoadOptions) error
	if opts.Profile != "" {
		loadOpts = append(loadOpts, config.WithSharedConfigProfile(opts.Profile))
	}
	if len(opts.SharedConfigFiles) > 0 {
		loadOpts = append(loadOpts, config.WithSharedConfigFiles(opts.SharedConfigFiles))
	}
	if len(opts.SharedCredentialsFiles) > 0 {
		loadOpts = append(loadOpts, config.WithSharedCredentialsFiles(opts.SharedCredentialsFiles))
	}
	if opts.Region != "" {
		loadOpts = append(loadOpts, config.WithRegion(opts.Region))
	}
	if opts.Credentials != nil {
		loadOpts = append(loadOpts, config.WithCredentialsProvider(opts.Credentials))
	}
	// A library does not log: the SDK would write to stderr.
	loadOpts = append(loadOpts, config.WithLogger(logging.Nop{}), config.WithClientLogMode(0))
	// One attempt per request: retries belong to the storage retry
	// decorator (see the package documentation).
	loadOpts = append(loadOpts, config.WithRetryer(func() aws.Retryer { return aws.NopRetryer{} }))
	if opts.HTTPClient != nil {
		loadOpts = append(loadOpts, config.WithHTTPClient(opts.HTTPClient))
	} else {
		loadOpts = append(loadOpts, config.WithHTTPClient(awshttp.NewBuildableClient().
			WithTransportOptions(func(t *http.Transport) {
				t.MaxIdleConnsPerHost = maxIdleConnsPerHost
				// A backstop deadline for a server that accepts and never
				// answers, for callers without the retry decorator's
				// per-attempt timeout (storage/stack).
				t.ResponseHeaderTimeout = storage.ResponseHeaderTimeout
			})))
	}
	cfg, err := config.LoadDefaultConfig(ctx, loadOpts...)
	if err != nil {
		return nil, fmt.Errorf("s3store: load AWS configuration for s3://%s: %w", bucket, err)
	}
	if opts.Anonymous {
		cfg.Credentials = aws.AnonymousCredentials{}
	}

	endpoint := opts.Endpoint
	for _, name := range []string{"S3_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"} {
		if endpoint != "" {
			break
		}
		endpoint = strings.TrimSpace(os.Getenv(name))
	}
	if endpoint == "" {
		// endpoint_url of the AWS configuration (the profile's, or its s3
		// services section's), which the SDK resolves per service: its
		// store is not AWS either, and gets the same handling (path
		// style, no region of its own, uploads without checksum
		// trailers). AWS_IGNORE_CONFIGURED_ENDPOINT_URLS leaves it unset.
		if be := s3.NewFromConfig(cfg).Options().BaseEndpoint; be != nil {
			endpoint = strings.TrimSpace(*be)
		}
	}
	if endpoint != "" {
		eu, err := url.Parse(endpoint)
		if err != nil || (eu.Scheme != "http" && eu.Scheme != "https") || eu.Host == "" {
			return nil, fmt.Errorf("s3store: endpoint %q for s3://%s: want http(s)://host[:port]", storage.RedactURL(endpoint), bucket)
		}
		// Stores other than AWS often reject the SDK's newer default for
		// uploads (CRC trailers in aws-chunked bodies) unless asked for
		// it. LoadDefaultConfig resolves an unset choice to that
		// default, so the user's own choice is told by the variable
		// (AWS_REQUEST_CHECKSUM_CALCULATION=when_supported keeps it).
		// Responses are still checked where the store sends a checksum
		// (a store that does not just sends none).
		if strings.TrimSpace(os.Getenv("AWS_REQUEST_CHECKSUM_CALCULATION")) == "" {
			cfg.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		}
	}
	var resolver s3.EndpointResolverV2
	if endpoint != "" && endpointParamsKnown() {
		// The SDK's own resolution, evaluated once per Bucket instead of
		// twice per request (see cachedResolver). AWS itself keeps the
		// SDK's resolver untouched.
		resolver = newCachedResolver(s3.NewDefaultEndpointResolverV2())
	}
	clientOpts := func(o *s3.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
			o.UsePathStyle = !opts.VirtualHostStyle
			if resolver != nil {
				o.EndpointResolverV2 = resolver
			}
		}
	}

	if cfg.Region == "" {
		// HeadBucket answers with the bucket's region in a header, even
		// when it refuses the (unsigned) request.
		probe := s3.NewFromConfig(cfg, clientOpts, func(o *s3.Options) { o.Region = "us-east-1" })
		// A store that accepts the connection and never answers must not
		// hang the open: the probe has a deadline of its own.
		pctx, cancel := context.WithTimeout(ctx, regionProbeTimeout)
		region, err := manager.GetBucketRegion(pctx, probe, bucket)
		cancel()
		switch {
		case err == nil && region != "":
			cfg.Region = region
		case endpoint != "":
			// S3-compatible stores often have no regions at all.
			cfg.Region = "us-east-1"
		case err == nil:
			return nil, fmt.Errorf("s3store: find region of s3://%s: the store reported none (set AWS_REGION or ?region=)", bucket)
		default:
			var nf manager.BucketNotFound
			if errors.As(err, &nf) {
				return nil, fmt.Errorf("s3store: find region of s3://%s: %w: bucket does not exist (or set AWS_REGION)", bucket, storage.ErrNotExist)
			}
			return nil, fmt.Errorf("s3store: find region of s3://%s (set AWS_REGION or ?region= to skip this): %w", bucket, err)
		}
	}

	// The user's choice (AWS_RESPONSE_CHECKSUM_VALIDATION, the profile's
	// response_checksum_validation): by default responses are checked,
	// here rather than by the SDK (see verify.go).
	verify := cfg.ResponseChecksumValidation != aws.ResponseChecksumValidationWhenRequired
	cfg.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	client := s3.NewFromConfig(cfg, clientOpts)
	// AWS itself: no endpoint of ours, nor an endpoint_url of the AWS
	// configuration (taken into endpoint above).
	onAWS := endpoint == "" && client.Options().BaseEndpoint == nil
	b := &Bucket{
		verify:        verify,
		fullObject:    onAWS,
		client:        client,
		creds:         cfg.Credentials,
		name:          bucket,
		root:          root,
		region:        cfg.Region,
		endpoint:      endpoint,
		requesterPays: opts.RequesterPays,
		listPageSize:  opts.ListPageSize,
		scheme:        "s3",
	}
	if opts.URLScheme != "" {
		b.scheme = opts.URLScheme
	}
	b.uploader = manager.NewUploader(client, func(u *manager.Uploader) {
		u.PartSize = DefaultPartSize
		u.Concurrency = DefaultConcurrency
		u.LeavePartsOnError = false
	})
	return b, nil
}

// regionProbeTimeout bounds the request that finds a bucket's region.
const regionProbeTimeout = 30 * time.Second

// Client returns the SDK client the Bucket uses, for operations the
// storage.Bucket interface does not cover.
func (b *Bucket) Client() *s3.Client { return b.client }

// Region returns the region the Bucket's requests are signed for.
func (b *Bucket) Region() string { return b.region }

// URL implements storage.Bucket.
func (b *Bucket) URL(key string) string {
	return b.scheme + "://" + b.name + "/" + b.root + key
}

// Close implements storage.Bucket. It marks the Bucket closed; idle
// connections are left to the HTTP client.
func (b *Bucket) Close() error {
	if b.closed.Swap(true) {
		return fmt.Errorf("s3store: close s3://%s/%s: %w", b.name, b.root, storage.ErrClosed)
	}
	return nil
}

// check validates the state of the Bucket and the key for op.
func (b *Bucket) check(op, key string) error {
	if b.closed.Load() {
		return fmt.Errorf("s3store: %s %s: %w", op, b.URL(key), storage.ErrClosed)
	}
	if err := storage.ValidateKey(key); err != nil {
		return fmt.Errorf("s3store: %s %s: %w", op, b.URL(key), err)
	}
	return nil
}

func (b *Bucket) payer() types.RequestPayer {
	if b.requesterPays {
		return types.RequestPayerRequester
	}
	return ""
}
