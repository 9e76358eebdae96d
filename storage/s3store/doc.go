// Package s3store is the storage.Bucket driver for Amazon S3 and
// S3-compatible stores (MinIO, versitygw, Ceph RGW, Cloudflare R2, ...),
// built on aws-sdk-go-v2.
//
// # URLs
//
//	s3://BUCKET/PREFIX[?option=value&...]
//
// Keys are relative to PREFIX. Query options, all optional:
//
//	region=us-west-2       the bucket's region (default: from the environment
//	                       or profile, else discovered with HeadBucket)
//	endpoint=http://host:9000
//	                       a custom (S3-compatible) endpoint
//	profile=NAME           a shared-config profile (like AWS_PROFILE)
//	requester_pays=true    send x-amz-request-payer: requester
//	anonymous=true         send unsigned requests (public buckets)
//	virtual_host=true      use virtual-hosted-style addressing even with a
//	                       custom endpoint
//
// # Environment
//
// Credentials and region come from the standard AWS chain, refreshed as they
// expire: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN;
// AWS_PROFILE with ~/.aws/config and ~/.aws/credentials (including SSO and
// credential_process); AWS_WEB_IDENTITY_TOKEN_FILE with AWS_ROLE_ARN
// (EKS IRSA); the ECS container endpoint; and EC2 instance metadata (IMDS,
// disabled by AWS_EC2_METADATA_DISABLED=true). AWS_REGION or
// AWS_DEFAULT_REGION set the region.
//
// The endpoint is taken, first match wins, from the endpoint= option,
// S3_ENDPOINT_URL (MosaicML Streaming's variable), AWS_ENDPOINT_URL_S3,
// AWS_ENDPOINT_URL and endpoint_url in the AWS configuration file (the
// profile's or its s3 services section's). A custom endpoint switches to path-style addressing
// (http://host/bucket/key), which every S3-compatible store accepts. With no
// region configured, the bucket's region is discovered with one HeadBucket
// request (falling back to us-east-1 for a custom endpoint that reports
// none). With a custom endpoint the SDK's endpoint rules are evaluated
// once per bucket and parameters, not for every request (they cost about
// half of the client's CPU per small GET); AWS endpoints are resolved by
// the SDK as usual.
//
// # Retries
//
// The SDK's own retries are switched off: every request is tried once, and
// failures surface as errors that storage.IsRetryable classifies (HTTP
// failures are *storage.HTTPError wrapping the SDK's error). Wrap the Bucket
// in the storage retry decorator, as the registry in internal/stores does,
// so that retries, backoff and the retry budget live in one place.
//
// # Integrity
//
// A whole-object read asks the store for the object's checksum and checks
// the body against it when it ends (CRC64-NVME, which S3 and compatible
// stores keep for objects uploaded without one, in hardware; else CRC32,
// CRC32C, SHA-256 or SHA-1), in place of the SDK's software check. A
// mismatch is an error matching storage.ErrChecksum. Ranges carry no
// whole-object checksum and are not checked. AWS_RESPONSE_CHECKSUM_VALIDATION=
// when_required (the SDK's setting) turns the check off.
//
// # Errors
//
// A missing object (404, NoSuchKey) matches storage.ErrNotExist; refused
// access (401/403) matches storage.ErrPermission, and its message names the
// credential source in use. errors.As reaches the SDK's error types
// (smithy.APIError, *awshttp.ResponseError).
//
// # Uploads
//
// Writers stream through the SDK's upload manager: objects up to the part
// size (WriteOptions.PartSize, default 16 MiB) go up in one PutObject, larger
// ones as a multipart upload with parts sent in parallel; a failed or
// cancelled multipart upload is aborted, so nothing appears.
package s3store
