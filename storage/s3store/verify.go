package s3store

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/minio/crc64nvme"

	"github.com/sluicedata/sluice/storage"
)

// Whole-object GETs are checked against the checksum the store keeps for
// the object, as the SDK does by default (response checksum validation
// "when_supported"), but by this package: the SDK computes CRC64-NVME,
// the checksum S3 and compatible stores keep for objects uploaded without
// one, in software at ~1.3 GB/s, about as much CPU as the rest of a GET;
// crc64nvme's carry-less multiply does it at ~17 GB/s. A mismatch is
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

// responseChecksum returns the algorithm, the expected value (base64, as
// sent) and a fresh hash for the checksum of a whole-object response, in
// the SDK's order of preference; ok is false when the store sent none, or
// only a checksum of the parts of a multipart upload (COMPOSITE: "...-N"),
// which the whole body cannot be checked against.
func responseChecksum(out *s3.GetObjectOutput) (alg, want string, h hash.Hash, ok bool) {
	if out.ChecksumType == types.ChecksumTypeComposite {
		return "", "", nil, false
	}
	for _, c := range []struct {
		alg  string
		v    *string
		hash func() hash.Hash
	}{
		{"CRC64NVME", out.ChecksumCRC64NVME, func() hash.Hash { return crc64nvme.New() }},
		{"CRC32", out.ChecksumCRC32, func() hash.Hash { return crc32.NewIEEE() }},
		{"CRC32C", out.ChecksumCRC32C, func() hash.Hash { return crc32.New(crc32.MakeTable(crc32.Castagnoli)) }},
		{"SHA256", out.ChecksumSHA256, sha256.New},
		{"SHA1", out.ChecksumSHA1, sha1.New},
	} {
		if c.v == nil || *c.v == "" {
			continue
		}
		if strings.Contains(*c.v, "-") {
			return "", "", nil, false // a checksum of checksums
		}
		return c.alg, *c.v, c.hash(), true
	}
	return "", "", nil, false
}

// verifiedBody is a response body checked against its checksum when it
// ends: the Read that reaches the end returns an error matching
// storage.ErrChecksum instead of io.EOF if the bytes differ.
type verifiedBody struct {
	io.ReadCloser
	url, alg, want string
	h              hash.Hash
	err            error
}

func newVerifiedBody(body io.ReadCloser, url string, out *s3.GetObjectOutput) io.ReadCloser {
	alg, want, h, ok := responseChecksum(out)
	if !ok {
		return body
	}
	return &verifiedBody{ReadCloser: body, url: url, alg: alg, want: want, h: h}
}

// Read implements io.Reader.
func (v *verifiedBody) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	n, err := v.ReadCloser.Read(p)
	v.h.Write(p[:n])
	if err == io.EOF {
		if got := base64.StdEncoding.EncodeToString(v.h.Sum(nil)); got != v.want {
			v.err = fmt.Errorf("s3store: get %s: the body's %s is %s, the store's %s: %w", v.url, v.alg, got, v.want, storage.ErrChecksum)
			return n, v.err
		}
	}
	return n, err
}

// ContinueCheck implements storage.ResumableCheck: the ranged response
// that resumes a broken body is checked with the bytes already read.
func (v *verifiedBody) ContinueCheck(rest io.Reader) io.Reader {
	return &verifiedBody{ReadCloser: io.NopCloser(rest), url: v.url, alg: v.alg, want: v.want, h: v.h}
}

// headChecksum returns the whole-object checksum a HEAD response carries,
// in the SDK's order of preference, or the zero Checksum when there is
// none or only a checksum of a multipart upload's parts.
func headChecksum(out *s3.HeadObjectOutput) storage.Checksum {
	if out.ChecksumType == types.ChecksumTypeComposite {
		return storage.Checksum{}
	}
	for _, c := range []struct {
		alg string
		v   *string
	}{
		{"CRC64NVME", out.ChecksumCRC64NVME}, {"CRC32", out.ChecksumCRC32}, {"CRC32C", out.ChecksumCRC32C},
		{"SHA256", out.ChecksumSHA256}, {"SHA1", out.ChecksumSHA1},
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
