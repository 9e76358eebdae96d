package storage

import (
	"context"
	"fmt"
	"io"
	"strings"
)

// StatFunc returns the metadata of the one object a range read is about.
type StatFunc func(ctx context.Context) (ObjectInfo, error)

// SettleRange answers, for HTTP-based drivers, the NewRangeReader requests
// that a ranged GET cannot express: a negative offset (a permanent error),
// an empty range, and a read to the end that starts exactly at the
// object's size (an HTTP range starting there is unsatisfiable, although
// the Bucket contract allows it). It calls stat only when it must. A nil
// reader with a nil error means the driver should issue its ranged GET.
// name is the driver's name and url the object's URL, both for messages.
func SettleRange(ctx context.Context, name, url string, off, length int64, stat StatFunc) (io.ReadCloser, error) {
	if off < 0 {
		return nil, Permanent(fmt.Errorf("%s: get %s: negative offset %d", name, url, off))
	}
	if length != 0 && (off == 0 || length > 0) {
		return nil, nil
	}
	info, err := stat(ctx)
	if err != nil {
		return nil, err
	}
	if off > info.Size {
		return nil, OffsetError(name, url, off, info.Size)
	}
	if length == 0 || off == info.Size {
		return emptyReader(), nil
	}
	return nil, nil
}

// UnsatisfiableRange settles a ranged GET that the store refused with 416:
// an offset equal to the object's size is an empty read, anything past it
// an OffsetError.
func UnsatisfiableRange(ctx context.Context, name, url string, off int64, stat StatFunc) (io.ReadCloser, error) {
	info, err := stat(ctx)
	if err != nil {
		return nil, err
	}
	if off == info.Size {
		return emptyReader(), nil
	}
	return nil, OffsetError(name, url, off, info.Size)
}

// OffsetError reports a range read starting past the end of an object; it
// matches ErrPrecondition.
func OffsetError(name, url string, off, size int64) error {
	return fmt.Errorf("%s: get %s: offset %d is past the end of the %d-byte object: %w", name, url, off, size, ErrPrecondition)
}

// NewBodyReader wraps a response body so that read errors name the object
// and reads stop as soon as ctx is cancelled (an HTTP transport notices a
// cancellation asynchronously and may hand out buffered bytes first).
func NewBodyReader(ctx context.Context, body io.ReadCloser, name, url string) io.ReadCloser {
	return &bodyReader{ctx: ctx, body: body, name: name, url: url}
}

// NewBodyReaderInfo is NewBodyReader for the response to a read of a
// whole object that described it: the reader's ObjectInfo returns info
// (see InfoReader).
func NewBodyReaderInfo(ctx context.Context, body io.ReadCloser, name, url string, info ObjectInfo) io.ReadCloser {
	return &bodyReader{ctx: ctx, body: body, name: name, url: url, info: info, hasInfo: true}
}

// InfoReader is implemented by the readers of NewRangeReader that know,
// from the store's response to a read of the whole object, what Stat
// would report of it; ok is false when they do not (a range, a read
// resumed across requests, a store that does not say). Decorators pass it
// on (ReaderInfo), so that a caller that reads a whole object and wants
// its ETag or time needs no second request.
type InfoReader interface {
	ObjectInfo() (info ObjectInfo, ok bool)
}

// ReaderInfo returns what r (an InfoReader) knows of the object it reads.
func ReaderInfo(r io.Reader) (ObjectInfo, bool) {
	if ir, ok := r.(InfoReader); ok {
		return ir.ObjectInfo()
	}
	return ObjectInfo{}, false
}

type bodyReader struct {
	ctx     context.Context
	body    io.ReadCloser
	name    string
	url     string
	info    ObjectInfo
	hasInfo bool
}

func (r *bodyReader) ObjectInfo() (ObjectInfo, bool) { return r.info, r.hasInfo }

func (r *bodyReader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, fmt.Errorf("%s: read %s: %w", r.name, r.url, err)
	}
	n, err := r.body.Read(p)
	if err != nil && err != io.EOF {
		err = fmt.Errorf("%s: read %s: %w", r.name, r.url, err)
	}
	return n, err
}

func (r *bodyReader) Close() error { return r.body.Close() }

func emptyReader() io.ReadCloser { return io.NopCloser(strings.NewReader("")) }
