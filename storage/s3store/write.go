//lint:file-ignore SA1019 feature/s3/manager.Uploader still works; moving to feature/s3/transfermanager is a separate change.

package s3store

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/s3/manager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/sluicedata/sluice/storage"
)

func (b *Bucket) NewWriter(ctx context.Context, key string, opts *storage.WriteOptions) (io.WriteCloser, error) {
	if err := b.check("put", key); err != nil {
		return nil, err
	}
	in, tune := b.putInput(key, opts)
	pr, pw := io.Pipe()
	in.Body = pr
	w := &writer{ctx: ctx, pw: pw, done: make(chan struct{}), b: b, key: key}
	go func() {
		defer close(w.done)
		if _, err := b.uploader.Upload(ctx, in, tune); err != nil {
			w.err = b.fail(ctx, "put", key, err)
			pr.CloseWithError(w.err)
			return
		}
		pr.Close()
	}()
	return w, nil
}

// Upload implements storage.Uploader: parts are read from src in place and
// sent in parallel, without copying them into buffers.
func (b *Bucket) Upload(ctx context.Context, key string, src io.ReaderAt, size int64, opts *storage.WriteOptions) error {
	if err := b.check("put", key); err != nil {
		return err
	}
	if size < 0 {
		return fmt.Errorf("s3store: put %s: negative size %d", b.URL(key), size)
	}
	in, tune := b.putInput(key, opts)
	in.Body = io.NewSectionReader(src, 0, size)
	if _, err := b.uploader.Upload(ctx, in, tune); err != nil {
		return b.fail(ctx, "put", key, err)
	}
	return nil
}

// putInput builds the request and upload-manager settings for a write.
func (b *Bucket) putInput(key string, opts *storage.WriteOptions) (*s3.PutObjectInput, func(*manager.Uploader)) {
	if opts == nil {
		opts = &storage.WriteOptions{}
	}
	in := &s3.PutObjectInput{
		Bucket:       aws.String(b.name),
		Key:          aws.String(b.root + key),
		ContentType:  aws.String("application/octet-stream"),
		RequestPayer: b.payer(),
	}
	if opts.ContentType != "" {
		in.ContentType = aws.String(opts.ContentType)
	}
	partSize := opts.PartSize
	if partSize == 0 {
		partSize = DefaultPartSize
	}
	partSize = max(partSize, manager.MinUploadPartSize)
	conc := opts.Concurrency
	if conc <= 0 {
		conc = DefaultConcurrency
	}
	return in, func(u *manager.Uploader) {
		u.PartSize = partSize
		u.Concurrency = conc
		if b.fullObject {
			u.ClientOptions = append(u.ClientOptions, func(o *s3.Options) {
				o.APIOptions = append(o.APIOptions, fullObjectChecksum)
			})
		}
	}
}

// fullObjectChecksum asks, on CreateMultipartUpload with a CRC algorithm
// (the SDK's default for AWS: CRC32 on every part), for a checksum of the
// whole object (x-amz-checksum-type: FULL_OBJECT) rather than S3's
// default for CRC32s, a checksum of the parts' checksums (COMPOSITE): a
// reader can check a whole-object GET against a full-object checksum, and
// parallel ranges by combining their CRCs (storage.RangeCheck), but
// nothing against a composite one. Used for AWS only (Bucket.fullObject);
// other endpoints send no checksums unless asked, and some that accept
// them refuse this type.
func fullObjectChecksum(stack *middleware.Stack) error {
	return stack.Build.Add(middleware.BuildMiddlewareFunc("SluiceFullObjectChecksum",
		func(ctx context.Context, in middleware.BuildInput, next middleware.BuildHandler) (middleware.BuildOutput, middleware.Metadata, error) {
			if req, ok := in.Request.(*smithyhttp.Request); ok && middleware.GetOperationName(ctx) == "CreateMultipartUpload" {
				if alg := req.Header.Get("X-Amz-Checksum-Algorithm"); fullObjectAlgorithm(alg) && req.Header.Get("X-Amz-Checksum-Type") == "" {
					req.Header.Set("X-Amz-Checksum-Type", string(types.ChecksumTypeFullObject))
				}
			}
			return next.HandleBuild(ctx, in)
		}), middleware.After)
}

// fullObjectAlgorithm reports whether S3 keeps a full-object checksum of
// a multipart upload with algorithm alg (the CRCs; SHAs are composite
// only).
func fullObjectAlgorithm(alg string) bool {
	switch strings.ToUpper(alg) {
	case "CRC32", "CRC32C", "CRC64NVME":
		return true
	}
	return false
}

// writer feeds an upload running in its own goroutine through a pipe.
type writer struct {
	ctx    context.Context
	pw     *io.PipeWriter
	done   chan struct{}
	err    error // the upload's result, set before done is closed
	b      *Bucket
	key    string
	closed bool
}

func (w *writer) Write(p []byte) (int, error) {
	if w.closed {
		return 0, fmt.Errorf("s3store: write %s: writer closed", w.b.URL(w.key))
	}
	return w.pw.Write(p)
}

// Close finishes the upload and waits for it. If the writer's context was
// cancelled the upload is abandoned and nothing appears.
func (w *writer) Close() error {
	if w.closed {
		return fmt.Errorf("s3store: close %s: writer already closed", w.b.URL(w.key))
	}
	w.closed = true
	if err := w.ctx.Err(); err != nil {
		w.pw.CloseWithError(err)
		<-w.done
		return fmt.Errorf("s3store: put %s: %w", w.b.URL(w.key), err)
	}
	w.pw.Close()
	<-w.done
	return w.err
}

// fail turns an SDK error from op on key into the error the storage
// package documents: an HTTP failure becomes a *storage.HTTPError (which
// matches ErrNotExist, ErrPermission and ErrPrecondition by status) wrapping
