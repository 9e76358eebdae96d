package s3store

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/sluicedata/sluice/storage"
)

// Stat implements storage.Bucket.
func (b *Bucket) Stat(ctx context.Context, key string) (storage.ObjectInfo, error) {
	if err := b.check("stat", key); err != nil {
		return storage.ObjectInfo{}, err
	}
	in := &s3.HeadObjectInput{
		Bucket:       aws.String(b.name),
		Key:          aws.String(b.root + key),
		RequestPayer: b.payer(),
	}
	if b.verify {
		// The object's checksum, against which reads in ranges are
		// checked (storage.RangeCheck).
		in.ChecksumMode = types.ChecksumModeEnabled
	}
	out, err := b.client.HeadObject(ctx, in)
	if err != nil {
		return storage.ObjectInfo{}, b.fail(ctx, "stat", key, err)
	}
	sum := headChecksum(out)
	if sum.Algorithm == "" && b.verify {
		sum = googHash(out.ResultMetadata) // GCS's XML API (HMAC keys)
	}
	return storage.ObjectInfo{
		Key:      key,
		Size:     aws.ToInt64(out.ContentLength),
		ModTime:  aws.ToTime(out.LastModified),
		ETag:     aws.ToString(out.ETag),
		Checksum: sum,
	}, nil
}

// NewRangeReader implements storage.Bucket with a ranged GetObject.
func (b *Bucket) NewRangeReader(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	if err := b.check("get", key); err != nil {
		return nil, err
	}
	stat := func(ctx context.Context) (storage.ObjectInfo, error) { return b.Stat(ctx, key) }
	if r, err := storage.SettleRange(ctx, "s3store", b.URL(key), off, length, stat); r != nil || err != nil {
		return r, err
	}
	in := &s3.GetObjectInput{
		Bucket:       aws.String(b.name),
		Key:          aws.String(b.root + key),
		RequestPayer: b.payer(),
	}
	if off > 0 || length > 0 {
		r := "bytes=" + strconv.FormatInt(off, 10) + "-"
		if length > 0 {
			r += strconv.FormatInt(off+length-1, 10)
		}
		in.Range = aws.String(r)
	}
	var checked []func(*s3.Options)
	if b.verify && in.Range == nil {
		checked = append(checked, s3.WithAPIOptions(checksumModeMiddleware))
	}
	out, err := b.client.GetObject(ctx, in, checked...)
	if err != nil {
		if storage.HTTPStatus(err) == http.StatusRequestedRangeNotSatisfiable {
			// off is at or past the end: only off == size is allowed.
			return storage.UnsatisfiableRange(ctx, "s3store", b.URL(key), off, stat)
		}
		return nil, b.fail(ctx, "get", key, err)
	}
	if in.Range != nil && out.ContentRange == nil {
		// A store that ignores Range would hand back the wrong bytes.
		out.Body.Close()
		return nil, storage.Permanent(fmt.Errorf("s3store: get %s: asked for %s but the store answered without Content-Range", b.URL(key), *in.Range))
	}
	body := out.Body
	var sum storage.Checksum
	if checked != nil {
		sum = responseChecksum(out)
		body = storage.CheckedBody(body, sum, b.URL(key))
	}
	if in.Range == nil && out.ContentLength != nil {
		// The whole object: the response says what Stat would.
		return storage.NewBodyReaderInfo(ctx, body, "s3store", b.URL(key), storage.ObjectInfo{
			Key: key, Size: aws.ToInt64(out.ContentLength), ModTime: aws.ToTime(out.LastModified), ETag: aws.ToString(out.ETag),
			Checksum: sum,
		}), nil
	}
	return storage.NewBodyReader(ctx, body, "s3store", b.URL(key)), nil
}

// List implements storage.Bucket with paged ListObjectsV2 requests.
func (b *Bucket) List(ctx context.Context, prefix string, fn func(storage.ObjectInfo) error) error {
	if b.closed.Load() {
		return fmt.Errorf("s3store: list %s: %w", b.URL(prefix), storage.ErrClosed)
	}
	in := &s3.ListObjectsV2Input{
		Bucket:       aws.String(b.name),
		Prefix:       aws.String(b.root + prefix),
		RequestPayer: b.payer(),
	}
	if b.listPageSize > 0 {
		in.MaxKeys = aws.Int32(b.listPageSize)
	}
	p := s3.NewListObjectsV2Paginator(b.client, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return b.fail(ctx, "list", prefix, err)
		}
		for _, o := range page.Contents {
			full := aws.ToString(o.Key)
			key, ok := strings.CutPrefix(full, b.root)
			if !ok || key == "" || strings.HasSuffix(key, "/") {
				// Outside the root (cannot happen with a correct store), or a
				// zero-byte "directory marker" some tools create.
				continue
			}
			if err := fn(storage.ObjectInfo{
				Key:     key,
				Size:    aws.ToInt64(o.Size),
				ModTime: aws.ToTime(o.LastModified),
				ETag:    aws.ToString(o.ETag),
			}); err != nil {
				return err
			}
		}
	}
	return nil
}

// Delete implements storage.Bucket. S3 reports success for a missing key,
// so Delete first checks that the object exists.
func (b *Bucket) Delete(ctx context.Context, key string) error {
	if err := b.check("delete", key); err != nil {
		return err
	}
	if _, err := b.Stat(ctx, key); err != nil {
		return err
	}
	_, err := b.client.DeleteObject(ctx, &s3.DeleteObjectInput{
		Bucket:       aws.String(b.name),
		Key:          aws.String(b.root + key),
		RequestPayer: b.payer(),
	})
	if err != nil {
		return b.fail(ctx, "delete", key, err)
	}
	return nil
}

// NewWriter implements storage.Bucket. The object is streamed through the
// SDK's upload manager (see the package documentation).
