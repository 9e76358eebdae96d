package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"sync/atomic"

	"golang.org/x/sync/errgroup"
)

// Copy copies the object srcKey of src to dstKey of dst, streaming (no
// whole-object buffer), and returns the number of bytes copied. When
// wantSize is not negative the copy fails, and dstKey does not appear,
// unless exactly that many bytes arrive. progress, when not nil, is called
// with the bytes copied so far in each step.
//
// A body that does not match the store's checksum (ErrChecksum, at its
// end) is never written: the write is abandoned and the object read
// again, up to checksumReads times in all (progress then counts the
// abandoned bytes too).
func Copy(ctx context.Context, src Bucket, srcKey string, dst Bucket, dstKey string, wantSize int64, progress func(int64)) (n int64, err error) {
	for range checksumReads {
		n, err = copyOnce(ctx, src, srcKey, dst, dstKey, wantSize, progress)
		if !errors.Is(err, ErrChecksum) || ctx.Err() != nil {
			break
		}
	}
	return n, err
}

func copyOnce(ctx context.Context, src Bucket, srcKey string, dst Bucket, dstKey string, wantSize int64, progress func(int64)) (n int64, err error) {
	r, err := src.NewRangeReader(ctx, srcKey, 0, -1)
	if err != nil {
		return 0, fmt.Errorf("storage: copy %s: %w", src.URL(srcKey), err)
	}
	defer func() { err = errors.Join(err, r.Close()) }()
	cr := &checkedReader{r: r, want: wantSize, progress: progress}
	n, err = WriteFrom(ctx, dst, dstKey, cr, nil)
	if err != nil {
		return n, fmt.Errorf("storage: copy %s: %w", src.URL(srcKey), err)
	}
	return n, nil
}

// checkedReader fails a stream whose length differs from want, before the
// writer can commit it.
type checkedReader struct {
	r        io.Reader
	want     int64 // negative: unknown
	got      int64
	progress func(int64)
}

func (c *checkedReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.got += int64(n)
	if n > 0 && c.progress != nil {
		c.progress(int64(n))
	}
	if c.want >= 0 {
		if c.got > c.want {
			return n, Permanent(fmt.Errorf("object is longer than its listed size %d", c.want))
		}
		if err != nil && err == io.EOF && c.got < c.want {
			return n, sizeError(0, c.got, c.want, true)
		}
	}
	return n, err
}

// CopyTreeOptions tunes CopyTree. A nil *CopyTreeOptions means the defaults.
type CopyTreeOptions struct {
	// SrcPrefix selects the objects of src to copy (all when empty); it is
	// a key prefix, usually a directory such as "train/".
	SrcPrefix string
	// DstPrefix replaces SrcPrefix in the copied keys.
	DstPrefix string
	// Concurrency bounds the objects copied at once. Zero means 8.
	Concurrency int
	// SkipExisting skips objects that already exist in dst with the same
	// size (a resumed copy).
	SkipExisting bool
	// Last reports keys that must be copied only after every other object
	// has been copied, so that a reader never sees an index that names
	// missing shards. Nil means IsIndexKey.
	Last func(key string) bool
	// Progress, when not nil, is called with the bytes just copied. It may
	// be called from several goroutines at once.
	Progress func(n int64)
	// OnObject, when not nil, is called after each object is copied or
	// skipped. It may be called from several goroutines at once.
	OnObject func(info ObjectInfo, skipped bool)
	// Objects, when not nil, is the list of objects to copy (their keys
	// start with SrcPrefix; a positive Size is checked), instead of listing
	// src. It serves stores that cannot list, and callers that listed
	// already (to size a progress bar).
	Objects []ObjectInfo
}

// CopyStats sums up a CopyTree.
type CopyStats struct {
	// Objects is the number of objects copied; Skipped those skipped.
	Objects, Skipped int64
	// Bytes is the number of bytes copied.
	Bytes int64
}

// IsIndexKey reports whether key names a dataset index (base name
// "index.json"), which CopyTree copies last by default.
func IsIndexKey(key string) bool { return path.Base(key) == "index.json" }

// CopyTree copies every object under opts.SrcPrefix of src to dst in
// parallel, index files last (see CopyTreeOptions.Last). It stops at the
// first error; objects already copied stay. opts may be nil.
func CopyTree(ctx context.Context, src, dst Bucket, opts *CopyTreeOptions) (CopyStats, error) {
	var o CopyTreeOptions
	if opts != nil {
		o = *opts
	}
	if o.Concurrency < 0 {
		return CopyStats{}, fmt.Errorf("storage: copy tree: negative Concurrency %d", o.Concurrency)
	}
	if o.Concurrency == 0 {
		o.Concurrency = 8
	}
	if o.Last == nil {
		o.Last = IsIndexKey
	}
	var objects, skipped, bytes atomic.Int64
	copyOne := func(ctx context.Context, info ObjectInfo) error {
		dstKey := o.DstPrefix + info.Key[len(o.SrcPrefix):]
		if o.SkipExisting {
			di, err := dst.Stat(ctx, dstKey)
			if err == nil && di.Size == info.Size {
				skipped.Add(1)
				if o.OnObject != nil {
					o.OnObject(info, true)
				}
				return nil
			}
			if err != nil && !errors.Is(err, ErrNotExist) {
				return fmt.Errorf("storage: copy %s: check destination: %w", src.URL(info.Key), err)
			}
		}
		want := info.Size
		if o.Objects != nil && want <= 0 {
			want = -1 // not known
		}
		n, err := Copy(ctx, src, info.Key, dst, dstKey, want, o.Progress)
		bytes.Add(n)
		if err != nil {
			return err
		}
		objects.Add(1)
		if o.OnObject != nil {
			o.OnObject(info, false)
		}
		return nil
	}
	var last []ObjectInfo
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(o.Concurrency)
	each := func(fn func(ObjectInfo) error) error { return src.List(gctx, o.SrcPrefix, fn) }
	if o.Objects != nil {
		for _, info := range o.Objects {
			if !strings.HasPrefix(info.Key, o.SrcPrefix) {
				return CopyStats{}, fmt.Errorf("storage: copy tree: object %q is not under the prefix %q", info.Key, o.SrcPrefix)
			}
		}
		each = func(fn func(ObjectInfo) error) error {
			for _, info := range o.Objects {
				if err := fn(info); err != nil {
					return err
				}
			}
			return nil
		}
	}
	listErr := each(func(info ObjectInfo) error {
		if o.Last(info.Key) {
			last = append(last, info)
			return nil
		}
		if gctx.Err() != nil {
			return context.Cause(gctx)
		}
		g.Go(func() error { return copyOne(gctx, info) }) // blocks while Concurrency copies run
		return nil
	})
	err := g.Wait()
	if err == nil && listErr != nil {
		err = fmt.Errorf("storage: list %s: %w", src.URL(o.SrcPrefix), listErr)
	}
	if err == nil {
		for _, info := range last {
			if err = copyOne(ctx, info); err != nil {
				break
			}
		}
	}
	return CopyStats{Objects: objects.Load(), Skipped: skipped.Load(), Bytes: bytes.Load()}, err
}
