package s3store

import (
	"context"
	"encoding/base64"
	"strings"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/sluicedata/sluice/storage"
)

// Whole-object GETs are checked against the checksum the store keeps for
// the object, as the SDK does by default (response checksum validation
// "when_supported"), but by this package: the SDK computes CRC64-NVME,
// the checksum S3 and compatible stores keep for objects uploaded without
// one, in software at ~1.3 GB/s, about as much CPU as the rest of a GET;
// crc64nvme's carry-less multiply (storage.CheckedBody's) does it at ~17 GB/s. A mismatch is
// reported as storage.ErrChecksum, which the retry decorator does not
// resume past (the SDK's own error looked like a transport failure, and a
// damaged body was resumed at its end and delivered whole). A user who
// turns validation off (AWS_RESPONSE_CHECKSUM_VALIDATION=when_required)
// gets no check. Ranges carry no whole-object checksum: Stat reports the
// object's (HEAD with the checksum mode), and a reader of ranges checks
// them together with storage.RangeCheck.

// checksumModeMiddleware is the request header that asks the store for
// the object's checksums (x-amz-checksum-mode: ENABLED), added before
// signing. Setting GetObjectInput.ChecksumMode instead would make the SDK
// validate the body itself.
func checksumModeMiddleware(stack *middleware.Stack) error {
	return stack.Build.Add(middleware.BuildMiddlewareFunc("SluiceChecksumMode",
		func(ctx context.Context, in middleware.BuildInput, next middleware.BuildHandler) (middleware.BuildOutput, middleware.Metadata, error) {
			if req, ok := in.Request.(*smithyhttp.Request); ok {
				req.Header.Set("X-Amz-Checksum-Mode", string(types.ChecksumModeEnabled))
			}
			return next.HandleBuild(ctx, in)
		}), middleware.After)
}

// responseChecksum returns the whole-object checksum a GET response
// carries (see wholeChecksum).
func responseChecksum(out *s3.GetObjectOutput) storage.Checksum {
	if c := wholeChecksum(out.ChecksumType, out.ChecksumCRC64NVME, out.ChecksumCRC32, out.ChecksumCRC32C,
		out.ChecksumSHA256, out.ChecksumSHA1); c.Algorithm != "" {
		return c
	}
	return googHash(out.ResultMetadata)
}

// headChecksum returns the whole-object checksum a HEAD response carries
// (see wholeChecksum).
func headChecksum(out *s3.HeadObjectOutput) storage.Checksum {
	return wholeChecksum(out.ChecksumType, out.ChecksumCRC64NVME, out.ChecksumCRC32, out.ChecksumCRC32C,
		out.ChecksumSHA256, out.ChecksumSHA1)
}

// wholeChecksum returns the first of the response's checksums in the
// SDK's order of preference, or the zero Checksum when there is none or
// only a checksum of the parts of a multipart upload (COMPOSITE, or a
// value "...-N"), which the whole body cannot be checked against.
func wholeChecksum(typ types.ChecksumType, crc64NVME, crc32, crc32C, sha256, sha1 *string) storage.Checksum {
	if typ == types.ChecksumTypeComposite {
		return storage.Checksum{}
	}
	for _, c := range []struct {
		alg string
		v   *string
	}{
		{"CRC64NVME", crc64NVME}, {"CRC32", crc32}, {"CRC32C", crc32C}, {"SHA256", sha256}, {"SHA1", sha1},
	} {
		if c.v == nil || *c.v == "" {
			continue
		}
		v, err := base64.StdEncoding.DecodeString(*c.v)
		if err != nil { // "...-N": a checksum of checksums, or unreadable
			return storage.Checksum{}
		}
		return storage.Checksum{Algorithm: c.alg, Value: v}
	}
	return storage.Checksum{}
}

// googHash returns the object's CRC32C that a response of GCS's XML API
// carries in x-goog-hash ("crc32c=<base64>,md5=<base64>"), in place of
// S3's x-amz-checksum-* (gs:// with HMAC keys reads through this
// package), or the zero Checksum: none, or a body the store transcoded
// (stored with a Content-Encoding: its bytes are not the stored ones).
func googHash(md middleware.Metadata) storage.Checksum {
	raw, ok := awsmiddleware.GetRawResponse(md).(*smithyhttp.Response)
	if !ok || raw == nil || raw.Response == nil || raw.Uncompressed || raw.Header.Get("Content-Encoding") != "" {
		return storage.Checksum{}
	}
	if enc := raw.Header.Get("X-Goog-Stored-Content-Encoding"); enc != "" && enc != "identity" {
		return storage.Checksum{}
	}
	for _, h := range raw.Header.Values("X-Goog-Hash") {
		for part := range strings.SplitSeq(h, ",") {
			k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
			if !ok || k != "crc32c" {
				continue
			}
			if b, err := base64.StdEncoding.DecodeString(v); err == nil && len(b) == 4 {
				return storage.Checksum{Algorithm: "CRC32C", Value: b}
			}
		}
	}
	return storage.Checksum{}
}
