package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"
)

// TempMarker appears in the name of every temporary file the storage
// helpers and the filestore driver create next to their destination
// ("." + base name + TempMarker + random suffix). A directory scan can
// delete such files left behind by a crash; IsTempName recognises them.
const TempMarker = ".sluice-tmp-"

// IsTempName reports whether the base name of a file is one of the
// temporary names the storage helpers create.
func IsTempName(name string) bool {
	return strings.HasPrefix(name, ".") && strings.Contains(name, TempMarker)
}

// createTemp creates a temporary file next to dst.
func createTemp(dst string) (*os.File, error) {
	return os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+TempMarker+"*")
}

// Default values of DownloadOptions.
const (
	DefaultPartSize            = 16 << 20
	DefaultDownloadConcurrency = 4
)

// copyBufSize is the size of the buffers that move bytes; one per part in
// flight, so memory stays flat whatever the object size.
const copyBufSize = 256 << 10

var bufPool = sync.Pool{New: func() any { b := make([]byte, copyBufSize); return &b }}

// DownloadOptions tunes Download. A nil *DownloadOptions means the defaults.
type DownloadOptions struct {
	// Size is the object's expected size in bytes. When positive, Download
	// skips the Stat round trip and fails unless the object has exactly
	// this size. Zero means unknown: Download asks the store.
	Size int64
	// PartSize is the size of the ranged parts a large object is split
	// into; objects no larger than one part are read with one request.
	// Zero means DefaultPartSize.
	PartSize int64
	// Concurrency bounds the parts downloaded at once. Zero means
	// DefaultDownloadConcurrency.
	Concurrency int
	// Perm is the mode the file gets (set exactly, not masked by the
	// umask). Zero means 0o644.
	Perm fs.FileMode
	// NoSync skips the fsync of the file and its directory before and after
	// the rename. The file still appears atomically, but may be lost or
	// empty after a power failure; for scratch copies only.
	NoSync bool
	// Progress, when not nil, is called with the number of bytes just
	// written to the file. It may be called from several goroutines at once.
	Progress func(n int64)
}

func (o *DownloadOptions) withDefaults() (DownloadOptions, error) {
	var d DownloadOptions
	if o != nil {
		d = *o
	}
	switch {
	case d.Size < 0:
		return d, fmt.Errorf("storage: download: negative Size %d", d.Size)
	case d.PartSize < 0:
		return d, fmt.Errorf("storage: download: negative PartSize %d", d.PartSize)
	case d.Concurrency < 0:
		return d, fmt.Errorf("storage: download: negative Concurrency %d", d.Concurrency)
	}
	if d.PartSize == 0 {
		d.PartSize = DefaultPartSize
	}
	if d.Concurrency == 0 {
		d.Concurrency = DefaultDownloadConcurrency
	}
	if d.Perm == 0 {
		d.Perm = 0o644
	}
	return d, nil
}

// Download copies the whole object key of b to the local file dstPath and
// returns its size. The file appears atomically: bytes go to a temporary
// file in the same directory (see TempMarker), which is checked against the
// expected size, synced, and renamed over dstPath; on any failure it is
// removed and dstPath is left as it was. Objects larger than
// opts.PartSize are fetched as parallel ranged reads written in place, so
// memory use stays flat (one copy buffer per part in flight). The parent
// directory of dstPath must exist.
//
// Download does not retry by itself; wrap b with the retry decorator for
// that (it also resumes bodies that break or stall midway).
func Download(ctx context.Context, b Bucket, key, dstPath string, opts *DownloadOptions) (n int64, err error) {
	o, err := opts.withDefaults()
	if err != nil {
		return 0, err
	}
	size := o.Size
	var sum Checksum
	if size == 0 || size > o.PartSize && o.Concurrency > 1 {
		// The size, and the checksum that ranges are checked against.
		info, err := b.Stat(ctx, key)
		if err != nil {
			return 0, fmt.Errorf("storage: download %s: %w", b.URL(key), err)
		}
		if size == 0 {
			size = info.Size
		}
		if info.Size == size {
			sum = info.Checksum
		}
	}
	f, err := createTemp(dstPath)
	if err != nil {
		return 0, fmt.Errorf("storage: download %s: %w", b.URL(key), err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err := f.Chmod(o.Perm); err != nil {
		return 0, fmt.Errorf("storage: download %s: %w", b.URL(key), err)
	}
	if size <= o.PartSize || o.Concurrency == 1 {
		// One read of the whole object, checked against the store's
		// checksum where it sends one: a damaged body is read again
		// over the same bytes of the file.
		for range checksumReads {
			err = readPart(ctx, b, key, f, 0, size, true, o.Progress, nil)
			if !errors.Is(err, ErrChecksum) || ctx.Err() != nil {
				break
			}
		}
	} else {
		// Ranges in parallel, checked together against the object's
		// checksum where the store keeps one that ranges combine into
		// (storage.RangeCheck), and read again when they do not match.
		rc := NewRangeCheck(sum, size)
		for i := 1; ; i++ {
			err = readParts(ctx, b, key, f, size, &o, rc)
			if err == nil {
				err = rc.Verify(b.URL(key))
			}
			if !errors.Is(err, ErrChecksum) || ctx.Err() != nil {
				break
			}
			if rc, err = recheck(ctx, b, key, size, rc, err, i); rc == nil {
				break
			}
		}
	}
	if err != nil {
		return 0, fmt.Errorf("storage: download %s: %w", b.URL(key), err)
	}
	if !o.NoSync {
		if err = f.Sync(); err != nil {
			return 0, fmt.Errorf("storage: download %s: sync %s: %w", b.URL(key), tmp, err)
		}
	}
	if err = f.Close(); err != nil {
		return 0, fmt.Errorf("storage: download %s: close %s: %w", b.URL(key), tmp, err)
	}
	if err = os.Rename(tmp, dstPath); err != nil {
		return 0, fmt.Errorf("storage: download %s: %w", b.URL(key), err)
	}
	if !o.NoSync {
		if err := syncDir(filepath.Dir(dstPath)); err != nil {
			// The file is in place; only its durability is in doubt.
			return size, fmt.Errorf("storage: download %s: sync directory: %w", b.URL(key), err)
		}
	}
	return size, nil
}

// readParts fetches size bytes as ranged parts in parallel.
func readParts(ctx context.Context, b Bucket, key string, f *os.File, size int64, o *DownloadOptions, rc *RangeCheck) error {
	if err := f.Truncate(size); err != nil {
		return err
	}
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(o.Concurrency)
	for off := int64(0); off < size; off += o.PartSize {
		n := min(o.PartSize, size-off)
		last := off+n == size
		g.Go(func() error { return readPart(ctx, b, key, f, off, n, last, o.Progress, rc) })
	}
	return g.Wait()
}

// readPart copies n bytes at off of the object into f at the same offset.
// The last part asks for one byte more (or is the whole object), so that
// an object longer than expected is noticed.
func readPart(ctx context.Context, b Bucket, key string, f *os.File, off, n int64, last bool, progress func(int64), rc *RangeCheck) (err error) {
	length := n
	switch {
	case last && off == 0:
		length = -1 // the whole object, its checksum checked by the store's reader
	case last:
		// One byte more notices a longer object; a read to the end from
		// an offset would cost a Stat first (SettleRange).
		length = n + 1
	}
	r, err := b.NewRangeReader(ctx, key, off, length)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, r.Close()) }()
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	got, err := copyAt(f, off, rc.Reader(r, off), *bp, n, progress)
	if err != nil {
		return err
	}
	if got != n {
		return sizeError(off, got, n, last)
	}
	return nil
}

// copyAt copies from r to w at offset off until r ends or more than limit
// bytes arrived, and returns the number copied. It fills buf before each
// write: a socket hands out a few tens of KiB per read, and one pwrite per
// buffer rather than per read saves most of a download's system calls.
func copyAt(w io.WriterAt, off int64, r io.Reader, buf []byte, limit int64, progress func(int64)) (int64, error) {
	var got int64
	for {
		// Not io.ReadFull: it reports a body that ends early as
		// io.ErrUnexpectedEOF, which is also how a reader says that its
		// body broke (a retryable truncation, not the object's end).
		nr, rerr := 0, error(nil)
		for nr < len(buf) && rerr == nil {
			var m int
			m, rerr = r.Read(buf[nr:])
			nr += m
		}
		if nr > 0 {
			if got+int64(nr) > limit {
				return got + int64(nr), nil // too long; the caller reports it
			}
			nw, werr := w.WriteAt(buf[:nr], off+got)
			got += int64(nw)
			if progress != nil && nw > 0 {
				progress(int64(nw))
			}
			if werr != nil {
				return got, werr
			}
		}
		if rerr == io.EOF {
			return got, nil
		}
		if rerr != nil {
			return got, rerr
		}
	}
}

// sizeError reports a part or object of the wrong length. A short body is
// a truncation (retryable); a long one means the object is not the one
// expected.
func sizeError(off, got, want int64, last bool) error {
	if got < want {
		return fmt.Errorf("object truncated: got %d bytes at offset %d, want %d: %w",
			got, off, want, io.ErrUnexpectedEOF)
	}
	if last {
		return Permanent(fmt.Errorf("object is longer than its expected size %d", off+want))
	}
	return fmt.Errorf("store returned more than the %d bytes asked for at offset %d", want, off)
}

// syncDir fsyncs a directory so that a rename in it is durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// Upload stores size bytes of src as the object key. It uses b's Uploader
// capability when b has one (parallel multipart uploads, retries of the
// whole upload) and otherwise streams src through NewWriter, abandoning the
// write on error so that no partial object appears. opts may be nil.
func Upload(ctx context.Context, b Bucket, key string, src io.ReaderAt, size int64, opts *WriteOptions) error {
	if size < 0 {
		return fmt.Errorf("storage: upload %s: negative size %d", b.URL(key), size)
	}
	if u, ok := b.(Uploader); ok {
		return u.Upload(ctx, key, src, size, opts)
	}
	_, err := WriteFrom(ctx, b, key, io.NewSectionReader(src, 0, size), opts)
	return err
}

// WriteFrom streams r into a new object key through NewWriter and returns
// the number of bytes written. On any error, including one from r, it
// abandons the write (cancels its context before Close), so that the object
// does not appear. opts may be nil.
func WriteFrom(ctx context.Context, b Bucket, key string, r io.Reader, opts *WriteOptions) (int64, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := b.NewWriter(wctx, key, opts)
	if err != nil {
		return 0, err
	}
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	n, err := io.CopyBuffer(onlyWriter{w}, onlyReader{r}, *bp)
	if err != nil {
		cancel()
		_ = w.Close() // the write is abandoned; its error adds nothing
		return n, fmt.Errorf("storage: write %s: %w", b.URL(key), err)
	}
	if err := w.Close(); err != nil {
		return n, fmt.Errorf("storage: write %s: %w", b.URL(key), err)
	}
	return n, nil
}

// onlyWriter and onlyReader hide ReadFrom/WriteTo so that io.CopyBuffer
// uses the pooled buffer rather than allocating its own.
type onlyWriter struct{ io.Writer }
type onlyReader struct{ io.Reader }

// UploadFile stores the local file at path as the object key (see Upload).
func UploadFile(ctx context.Context, b Bucket, key, path string, opts *WriteOptions) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("storage: upload %s: %w", b.URL(key), err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("storage: upload %s: %w", b.URL(key), err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("storage: upload %s: %s is not a regular file", b.URL(key), path)
	}
	return Upload(ctx, b, key, f, fi.Size(), opts)
}

// ReadAll reads the whole object key into memory. It fails, without
// reading further, when the object is larger than maxSize bytes, so that
// input from outside (an index.json, say) never causes an unbounded
// allocation.
func ReadAll(ctx context.Context, b Bucket, key string, maxSize int64) (data []byte, err error) {
	data, _, _, err = ReadAllInfo(ctx, b, key, maxSize)
	return data, err
}

// ReadAllInfo is ReadAll that also returns what the store's response told
// of the object (see InfoReader); ok is false when it told nothing.
//
// A body that does not match the store's checksum (ErrChecksum) is read
// again from its start, up to checksumReads times in all.
func ReadAllInfo(ctx context.Context, b Bucket, key string, maxSize int64) (data []byte, info ObjectInfo, ok bool, err error) {
	for range checksumReads {
		data, info, ok, err = readAllInfo(ctx, b, key, maxSize)
		if !errors.Is(err, ErrChecksum) || ctx.Err() != nil {
			break
		}
	}
	return data, info, ok, err
}

// checksumReads is how many times ReadAllInfo reads an object whose body
// arrives damaged.
const checksumReads = 3

func readAllInfo(ctx context.Context, b Bucket, key string, maxSize int64) (data []byte, info ObjectInfo, ok bool, err error) {
	if maxSize < 0 {
		return nil, ObjectInfo{}, false, fmt.Errorf("storage: read %s: negative maxSize %d", b.URL(key), maxSize)
	}
	r, err := b.NewRangeReader(ctx, key, 0, -1)
	if err != nil {
		return nil, ObjectInfo{}, false, fmt.Errorf("storage: read %s: %w", b.URL(key), err)
	}
	defer func() { err = errors.Join(err, r.Close()) }()
	// Read in chunks and join them once at the end: growing one slice by
	// doubling would hold up to twice the limit (plus the garbage of every
	// smaller copy) before a hostile, endless body is refused.
	const chunk = 1 << 20
	var chunks [][]byte
	var total int64
	lr := io.LimitReader(r, maxSize+1)
	for {
		buf := make([]byte, min(chunk, maxSize+1-total))
		n, rerr := fill(lr, buf)
		if n > 0 {
			chunks = append(chunks, buf[:n])
			total += int64(n)
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return nil, ObjectInfo{}, false, fmt.Errorf("storage: read %s: %w", b.URL(key), rerr)
		}
		if total > maxSize {
			return nil, ObjectInfo{}, false, Permanent(fmt.Errorf("storage: read %s: object larger than the limit of %d bytes", b.URL(key), maxSize))
		}
	}
	if total > maxSize {
		return nil, ObjectInfo{}, false, Permanent(fmt.Errorf("storage: read %s: object larger than the limit of %d bytes", b.URL(key), maxSize))
	}
	data = make([]byte, 0, total)
	for _, c := range chunks {
		data = append(data, c...)
	}
	info, ok = ReaderInfo(r)
	if ok && info.Size != total {
		ok = false // not what was read
	}
	return data, info, ok, nil
}

// fill reads into buf until it is full or r fails; io.EOF means the body
// ended (any other error, io.ErrUnexpectedEOF included, is a failure).
func fill(r io.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// Exists reports whether the object key exists. Errors other than a
// missing object are returned.
func Exists(ctx context.Context, b Bucket, key string) (bool, error) {
	_, err := b.Stat(ctx, key)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, ErrNotExist):
		return false, nil
	}
	return false, err
}
