package gcsstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/s3store"
)

// XMLEndpoint is Google Cloud Storage's S3-compatible XML API, where
// requests signed with HMAC keys go.
const XMLEndpoint = "https://storage.googleapis.com"

// hmacRegion is the region HMAC requests are signed for; GCS takes "auto"
// (as MosaicML Streaming's boto3 client sends).
const hmacRegion = "auto"

// HMACFromEnv returns the HMAC key and secret of an environment (getenv is
// os.Getenv, or a job's variables) when it selects them, as MosaicML
// Streaming does: GCS_KEY and GCS_SECRET both set. Otherwise ok is false
// and the store uses Application Default Credentials.
func HMACFromEnv(getenv func(string) string) (key, secret string, ok bool) {
	key, secret = getenv("GCS_KEY"), getenv("GCS_SECRET")
	if key == "" || secret == "" {
		return "", "", false
	}
	return key, secret, true
}

// NewStore returns the store for bucket and prefix: with HMAC keys in opts
// (HMACKey, HMACSecret) a Bucket of the S3 driver on the XML API (see
// NewHMAC), otherwise New's Bucket. opts may be nil.
func NewStore(ctx context.Context, bucket, prefix string, opts *Options) (storage.Bucket, error) {
	if opts != nil && (opts.HMACKey != "" || opts.HMACSecret != "") {
		return NewHMAC(ctx, bucket, prefix, opts)
	}
	return New(ctx, bucket, prefix, opts)
}

// NewHMAC returns a Bucket that reads and writes gs://bucket/prefix
// through GCS's S3-compatible XML API with the HMAC key opts.HMACKey and
// secret opts.HMACSecret, signed with AWS Signature Version 4 for opts.Region
// (else "auto") by the S3 driver (storage/s3store). Requests go to opts.Endpoint,
// else XMLEndpoint; STORAGE_EMULATOR_HOST does not apply (the emulator
// speaks the JSON API). URLs and messages name gs://bucket; a refused
// request names the key (shortened) and where it came from, never the
// secret. Anonymous, CredentialsFile, UserProject and JSONReads do not
// apply and are refused.
func NewHMAC(ctx context.Context, bucket, prefix string, opts *Options) (storage.Bucket, error) {
	if bucket == "" {
		return nil, errors.New("gcsstore: no bucket name (want gs://BUCKET/PREFIX)")
	}
	if opts == nil || opts.HMACKey == "" || opts.HMACSecret == "" {
		return nil, fmt.Errorf("gcsstore: HMAC access to gs://%s needs both a key and a secret (GCS_KEY and GCS_SECRET)", bucket)
	}
	switch {
	case opts.Anonymous:
		return nil, fmt.Errorf("gcsstore: gs://%s: anonymous access and HMAC keys (GCS_KEY, GCS_SECRET) exclude each other", bucket)
	case opts.CredentialsFile != "":
		return nil, fmt.Errorf("gcsstore: gs://%s: a credentials file and HMAC keys (GCS_KEY, GCS_SECRET) exclude each other", bucket)
	case opts.UserProject != "":
		return nil, fmt.Errorf("gcsstore: gs://%s: user_project is not supported with HMAC keys (GCS_KEY, GCS_SECRET)", bucket)
	}
	source := opts.HMACSource
	if source == "" {
		source = "the HMAC key of the options"
	}
	region := opts.Region
	if region == "" {
		region = hmacRegion
	}
	endpoint := opts.Endpoint
	if endpoint == "" {
		endpoint = XMLEndpoint
	}
	b, err := s3store.New(ctx, bucket, prefix, &s3store.Options{
		Region:       region,
		Endpoint:     endpoint,
		Credentials:  hmacCredentials{key: opts.HMACKey, secret: opts.HMACSecret, source: source},
		HTTPClient:   opts.HTTPClient,
		ListPageSize: int32(opts.ListPageSize),
		URLScheme:    "gs",
	})
	if err != nil {
		return nil, fmt.Errorf("gcsstore: gs://%s with HMAC key from %s: %w", bucket, source, err)
	}
	return b, nil
}

// hmacCredentials hands the S3 driver a GCS HMAC key; Source names where
// it came from in the driver's messages about refused requests.
type hmacCredentials struct{ key, secret, source string }

// Retrieve implements aws.CredentialsProvider.
func (c hmacCredentials) Retrieve(context.Context) (aws.Credentials, error) {
	return aws.Credentials{AccessKeyID: c.key, SecretAccessKey: c.secret, Source: c.source + " (GCS HMAC key)"}, nil
}
