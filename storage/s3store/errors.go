package s3store

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"

	"github.com/sluicedata/sluice/storage"
)

// the SDK's error; anything else is wrapped with the operation and URL.
func (b *Bucket) fail(ctx context.Context, op, key string, err error) error {
	u := b.URL(key)
	status := storage.HTTPStatus(err)
	if status == 0 {
		return fmt.Errorf("s3store: %s %s: %w", op, u, err)
	}
	he := &storage.HTTPError{Op: op, URL: u, StatusCode: status, Err: err}
	var apiErr interface{ ErrorCode() string }
	if errors.As(err, &apiErr) {
		he.Code = apiErr.ErrorCode()
	}
	var re *awshttp.ResponseError
	bucketRegion := ""
	if errors.As(err, &re) && re.Response != nil {
		he.RetryAfter = storage.ParseRetryAfter(re.Response.Header.Get("Retry-After"), time.Now())
		bucketRegion = re.Response.Header.Get("X-Amz-Bucket-Region")
	}
	if authCodes[he.Code] && status != http.StatusUnauthorized && status != http.StatusForbidden {
		// Some S3-compatible stores answer an unknown key with another
		// status (versitygw: 404 XAdminUserNotFound); it is a refusal all
		// the same, and must not pass for a missing object.
		he.Err = fmt.Errorf("store answered HTTP %d: %w", status, he.Err)
		he.StatusCode, status = http.StatusForbidden, http.StatusForbidden
	}
	switch {
	case status == http.StatusNotFound && he.Code == "NoSuchBucket":
		he.Err = fmt.Errorf("bucket %q does not exist at %s: %w", b.name, b.endpointName(), err)
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		he.Err = fmt.Errorf("%s: %w", b.describeAccess(ctx), err)
	case bucketRegion != "" && bucketRegion != b.region && status != http.StatusNotFound:
		he.Err = fmt.Errorf("bucket %q is in region %s but requests are signed for %s (set AWS_REGION=%s or ?region=%s): %w",
			b.name, bucketRegion, b.region, bucketRegion, bucketRegion, err)
	case status == http.StatusMovedPermanently || he.Code == "PermanentRedirect" || he.Code == "AuthorizationHeaderMalformed":
		he.Err = fmt.Errorf("requests are signed for region %s, which is not the bucket's (set AWS_REGION or ?region=): %w", b.region, err)
	case status == http.StatusBadRequest && op == "stat" && (he.Code == "" || he.Code == "BadRequest"):
		// The answer to a HEAD carries no error document.
		he.Err = fmt.Errorf("the usual cause is a wrong region (requests are signed for %s; set AWS_REGION or ?region=): %w", b.region, err)
	}
	return he
}

// authCodes are S3 error codes that mean the request's credentials were
// refused.
var authCodes = map[string]bool{
	"AccessDenied":          true,
	"InvalidAccessKeyId":    true,
	"SignatureDoesNotMatch": true,
	"ExpiredToken":          true,
	"InvalidToken":          true,
	"TokenRefreshRequired":  true,
	"XAdminUserNotFound":    true,
}

// endpointName names where requests go, for messages.
func (b *Bucket) endpointName() string {
	if b.endpoint != "" {
		return storage.RedactURL(b.endpoint)
	}
	return "AWS S3 (" + b.region + ")"
}

// describeAccess says which credentials a refused request used, so that a
// person can tell which identity lacks the permission.
func (b *Bucket) describeAccess(ctx context.Context) string {
	src := "no credentials (anonymous request)"
	if b.creds != nil {
		if _, anon := b.creds.(aws.AnonymousCredentials); !anon {
			// The credentials are cached by the SDK, so this is normally no
			// I/O; bound it anyway.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			c, err := b.creds.Retrieve(cctx)
			cancel()
			switch {
			case err != nil:
				src = "credentials that could not be loaded (" + err.Error() + ")"
			case c.Source != "":
				src = "access key " + redactKey(c.AccessKeyID) + " from " + c.Source
			default:
				src = "access key " + redactKey(c.AccessKeyID)
			}
		}
	}
	hint := "; for a requester-pays bucket add ?requester_pays=true"
	if b.requesterPays {
		hint = " (requester pays is on)"
	}
	if b.scheme != "s3" {
		hint = "" // another store's XML API (gs:// with HMAC keys)
	}
	return fmt.Sprintf("request to %s with %s in region %s; check that this identity may access bucket %q (IAM and bucket policy)%s",
		b.endpointName(), src, b.region, b.name, hint)
}

// redactKey shows enough of an access key ID to recognise it.
func redactKey(id string) string {
	if len(id) <= 8 {
		return "****"
	}
	return id[:4] + "…" + id[len(id)-4:]
}
