// Package filestore is a storage.Bucket on a local directory.
//
// # URLs
//
// A plain path ("/data/train", "./out") or a file URL ("file:///data/train",
// "file://localhost/data/train") names the root directory. Keys are paths
// below it, with "/" as the separator.
//
// # Guarantees
//
// Keys can never reach outside the root: every access goes through an
// os.Root, which refuses ".." and symbolic links that lead out of the
// directory. Writes go to a temporary file in the destination directory
// (named with storage.TempMarker), which is synced and renamed into place by
// Close, so readers never see a partial object; List and Stat never report
// temporary files. Deleting an object removes the directories it leaves
// empty.
//
// The root is created by the first write if it does not exist; until then
// the bucket is empty. A key cannot be both an object and the parent of
// other keys ("a" and "a/b"), a limit of file systems that object stores do
// not have.
package filestore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/sluicedata/sluice/storage"
)

// Bucket is a storage.Bucket on a local directory. It is safe for
// concurrent use.
type Bucket struct {
	dir string // absolute, cleaned

	// mu guards root and closed.
	mu     sync.Mutex
	root   *os.Root // nil until the directory exists
	closed bool
}

var _ storage.Bucket = (*Bucket)(nil)

// New returns a Bucket rooted at dir. The directory need not exist yet.
func New(dir string) (*Bucket, error) {
	if dir == "" {
		return nil, errors.New("filestore: empty directory name")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("filestore: %s: %w", dir, err)
	}
	if fi, err := os.Stat(abs); err == nil && !fi.IsDir() {
		return nil, fmt.Errorf("filestore: %s is not a directory", abs)
	}
	return &Bucket{dir: abs}, nil
}

// Open is a storage.Opener for plain paths and file:// URLs.
func Open(_ context.Context, u *url.URL) (storage.Bucket, error) {
	p := u.Path
	if u.Opaque != "" {
		p = u.Opaque
	}
	if u.Host != "" && u.Host != "localhost" {
		if u.Scheme == "file" && u.Path == "" {
			// "file://relative/dir": take host and path together.
			p = u.Host
		} else if u.Scheme == "file" {
			p = u.Host + u.Path
		}
	}
	if p == "" {
		return nil, fmt.Errorf("filestore: URL %q names no directory", u.String())
	}
	return New(p)
}

// Dir returns the root directory.
func (b *Bucket) Dir() string { return b.dir }

// URL implements storage.Bucket.
func (b *Bucket) URL(key string) string {
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(b.dir) + "/" + key}).String()
}

// errNoRoot reports that the root directory does not exist yet.
var errNoRoot = errors.New("root directory does not exist")

// getRoot returns the os.Root, opening it (and with create, creating the
// directory) on first use.
func (b *Bucket) getRoot(create bool) (*os.Root, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, storage.ErrClosed
	}
	if b.root != nil {
		return b.root, nil
	}
	if create {
		if err := os.MkdirAll(b.dir, 0o755); err != nil {
			return nil, err
		}
	}
	r, err := os.OpenRoot(b.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errNoRoot
	}
	if err != nil {
		return nil, err
	}
	b.root = r
	return r, nil
}

// checkKey validates key, refusing names the bucket uses for temporary
// files.
func checkKey(key string) error {
	if err := storage.ValidateKey(key); err != nil {
		return err
	}
	for elem := range strings.SplitSeq(key, "/") {
		if storage.IsTempName(elem) {
			return fmt.Errorf("%w %q: element %q is reserved for temporary files", storage.ErrInvalidKey, key, elem)
		}
	}
	return nil
}

// fail wraps err for op on key, mapping file-system errors to the storage
// sentinels.
func (b *Bucket) fail(op, key string, err error) error {
	switch {
	case errors.Is(err, errNoRoot):
		err = fmt.Errorf("%w (%v)", storage.ErrNotExist, err)
	case errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.EISDIR):
		// A path element is a file, or the key is a directory: no
		// such object.
		err = fmt.Errorf("%w: %w", storage.ErrNotExist, err)
	case escapes(err):
		// A symbolic link that leads out of the root: refused, and no
		// other attempt changes that (the retry decorator took the
		// unclassified error for a transient one, for minutes).
		err = fmt.Errorf("%w: a symbolic link on the path leads outside %s: %w", storage.ErrPermission, b.dir, err)
	}
	return fmt.Errorf("filestore: %s %s: %w", op, b.URL(key), err)
}

// escapes reports whether err is os.Root's refusal of a path that leads
// out of the root, which the os package does not export.
func escapes(err error) bool {
	var pe *fs.PathError
	return errors.As(err, &pe) && pe.Err != nil && pe.Err.Error() == "path escapes from parent"
}

// Stat implements storage.Bucket.
func (b *Bucket) Stat(ctx context.Context, key string) (storage.ObjectInfo, error) {
	if err := checkKey(key); err != nil {
		return storage.ObjectInfo{}, fmt.Errorf("filestore: stat: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return storage.ObjectInfo{}, b.fail("stat", key, err)
	}
	root, err := b.getRoot(false)
	if err != nil {
		return storage.ObjectInfo{}, b.fail("stat", key, err)
	}
	fi, err := root.Stat(key)
	if err != nil {
		return storage.ObjectInfo{}, b.fail("stat", key, err)
	}
	if !fi.Mode().IsRegular() {
		return storage.ObjectInfo{}, b.fail("stat", key, fmt.Errorf("%w: not a regular file", storage.ErrNotExist))
	}
	return storage.ObjectInfo{Key: key, Size: fi.Size(), ModTime: fi.ModTime()}, nil
}

// NewRangeReader implements storage.Bucket.
func (b *Bucket) NewRangeReader(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	if err := checkKey(key); err != nil {
		return nil, fmt.Errorf("filestore: get: %w", err)
	}
	if off < 0 {
		return nil, b.fail("get", key, storage.Permanent(fmt.Errorf("negative offset %d", off)))
	}
	if err := ctx.Err(); err != nil {
		return nil, b.fail("get", key, err)
	}
	root, err := b.getRoot(false)
	if err != nil {
		return nil, b.fail("get", key, err)
	}
	f, err := root.Open(key)
	if err != nil {
		return nil, b.fail("get", key, err)
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%w: not a regular file", storage.ErrNotExist)
	}
	if err == nil && off > fi.Size() {
		err = fmt.Errorf("offset %d beyond size %d: %w", off, fi.Size(), storage.ErrPrecondition)
	}
	if err != nil {
		f.Close()
		return nil, b.fail("get", key, err)
	}
	n := fi.Size() - off
	if length >= 0 && length < n {
		n = length
	}
	r := &reader{ctx: ctx, f: f, r: io.NewSectionReader(f, off, n)}
	if off == 0 && length < 0 {
		// The whole file: what Stat would say is at hand.
		r.info, r.hasInfo = storage.ObjectInfo{Key: key, Size: fi.Size(), ModTime: fi.ModTime()}, true
	}
	return r, nil
}

// reader reads a file section; it stops when its context is cancelled.
type reader struct {
	ctx context.Context
	f   *os.File
	r   *io.SectionReader
	// info is the file's, when the whole file is read (see
	// storage.InfoReader).
	info    storage.ObjectInfo
	hasInfo bool
}

// ObjectInfo implements storage.InfoReader.
func (r *reader) ObjectInfo() (storage.ObjectInfo, bool) { return r.info, r.hasInfo }

func (r *reader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}

func (r *reader) Close() error { return r.f.Close() }

// NewWriter implements storage.Bucket.
func (b *Bucket) NewWriter(ctx context.Context, key string, _ *storage.WriteOptions) (io.WriteCloser, error) {
	if err := checkKey(key); err != nil {
		return nil, fmt.Errorf("filestore: put: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, b.fail("put", key, err)
	}
	root, err := b.getRoot(true)
	if err != nil {
		return nil, b.fail("put", key, err)
	}
	dir := path.Dir(key)
	if dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return nil, b.fail("put", key, err)
		}
	}
	var f *os.File
	var tmp string
	for range 10 {
		tmp = path.Join(dir, "."+path.Base(key)+storage.TempMarker+randSuffix())
		f, err = root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if !errors.Is(err, fs.ErrExist) {
			break
		}
	}
	if err != nil {
		return nil, b.fail("put", key, err)
	}
	return &writer{ctx: ctx, b: b, root: root, key: key, tmp: tmp, f: f}, nil
}

type writer struct {
	ctx    context.Context
	b      *Bucket
	root   *os.Root
	key    string
	tmp    string
	f      *os.File
	err    error // sticky
	closed bool
}

func (w *writer) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	if w.closed {
		return 0, w.b.fail("put", w.key, errors.New("write after close"))
	}
	if err := w.ctx.Err(); err != nil {
		w.err = w.b.fail("put", w.key, err)
		return 0, w.err
	}
	n, err := w.f.Write(p)
	if err != nil {
		w.err = w.b.fail("put", w.key, err)
	}
	return n, w.err
}

func (w *writer) Close() error {
	if w.closed {
		return w.b.fail("put", w.key, errors.New("already closed"))
	}
	w.closed = true
	err := w.err
	if err == nil {
		if cerr := w.ctx.Err(); cerr != nil {
			err = w.b.fail("put", w.key, cerr)
		}
	}
	if err == nil {
		if serr := w.f.Sync(); serr != nil {
			err = w.b.fail("put", w.key, serr)
		}
	}
	if cerr := w.f.Close(); err == nil && cerr != nil {
		err = w.b.fail("put", w.key, cerr)
	}
	if err == nil {
		if rerr := w.root.Rename(w.tmp, w.key); rerr != nil {
			err = w.b.fail("put", w.key, rerr)
		}
	}
	if err != nil {
		_ = w.root.Remove(w.tmp) // the write is abandoned
		return err
	}
	if d, derr := w.root.Open(path.Dir(w.key)); derr == nil {
		derr = d.Sync()
		d.Close()
		if derr != nil {
			return w.b.fail("put", w.key, fmt.Errorf("sync directory: %w", derr))
		}
	}
	return nil
}

// Delete implements storage.Bucket.
func (b *Bucket) Delete(ctx context.Context, key string) error {
	if err := checkKey(key); err != nil {
		return fmt.Errorf("filestore: delete: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return b.fail("delete", key, err)
	}
	root, err := b.getRoot(false)
	if err != nil {
		return b.fail("delete", key, err)
	}
	fi, err := root.Lstat(key)
	if err == nil && fi.IsDir() {
		err = fmt.Errorf("%w: a directory", storage.ErrNotExist)
	}
	if err == nil {
		err = root.Remove(key)
	}
	if err != nil {
		return b.fail("delete", key, err)
	}
	// Remove the directories the object leaves empty; a directory that
	// is not empty (or was just filled by a concurrent write) stays.
	for dir := path.Dir(key); dir != "."; dir = path.Dir(dir) {
		if root.Remove(dir) != nil {
			break
		}
	}
	return nil
}

// List implements storage.Bucket.
func (b *Bucket) List(ctx context.Context, prefix string, fn func(storage.ObjectInfo) error) error {
	if err := ctx.Err(); err != nil {
		return b.fail("list", prefix, err)
	}
	root, err := b.getRoot(false)
	if errors.Is(err, errNoRoot) {
		return nil
	}
	if err != nil {
		return b.fail("list", prefix, err)
	}
	// Start at the deepest directory the prefix names entirely.
	start := ""
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		start = prefix[:i]
		if storage.ValidateKey(start) != nil {
			return nil // no key can have this prefix
		}
	}
	stop := errors.New("stop")
	var fnErr error
	err = b.walk(ctx, root, start, prefix, func(info storage.ObjectInfo) error {
		if err := fn(info); err != nil {
			fnErr = err
			return stop
		}
		return nil
	})
	if fnErr != nil {
		return fnErr
	}
	if err != nil {
		return b.fail("list", prefix, err)
	}
	return nil
}

// walk lists the files below dir whose keys start with prefix, in byte
// order of their keys. Directory entries are ordered as if their names
// ended in "/", which gives the order of the full keys.
func (b *Bucket) walk(ctx context.Context, root *os.Root, dir, prefix string, fn func(storage.ObjectInfo) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	name := dir
	if name == "" {
		name = "."
	}
	d, err := root.Open(name)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil
	}
	if err != nil {
		return err
	}
	entries, err := d.ReadDir(-1)
	d.Close()
	if errors.Is(err, syscall.ENOTDIR) {
		return nil
	}
	if err != nil {
		return err
	}
	type entry struct {
		sortKey string
		key     string
		dir     bool
	}
	list := make([]entry, 0, len(entries))
	for _, e := range entries {
		if storage.IsTempName(e.Name()) {
			continue
		}
		key := e.Name()
		if dir != "" {
			key = dir + "/" + key
		}
		isDir := e.IsDir() // symbolic links to directories are not followed
		sortKey := key
		if isDir {
			sortKey += "/"
			// Skip directories that cannot hold a key with the prefix.
			if !strings.HasPrefix(sortKey, prefix) && !strings.HasPrefix(prefix, sortKey) {
				continue
			}
		} else if !strings.HasPrefix(key, prefix) {
			continue
		}
		list = append(list, entry{sortKey: sortKey, key: key, dir: isDir})
	}
	slices.SortFunc(list, func(a, b entry) int { return strings.Compare(a.sortKey, b.sortKey) })
	for _, e := range list {
		if e.dir {
			if err := b.walk(ctx, root, e.key, prefix, fn); err != nil {
				return err
			}
			continue
		}
		fi, err := root.Stat(e.key)
		if err != nil || !fi.Mode().IsRegular() {
			continue // vanished, a dangling or escaping link, or not a file
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(storage.ObjectInfo{Key: e.key, Size: fi.Size(), ModTime: fi.ModTime()}); err != nil {
			return err
		}
	}
	return nil
}

// Close implements storage.Bucket.
func (b *Bucket) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return fmt.Errorf("filestore: close %s: %w", b.URL(""), storage.ErrClosed)
	}
	b.closed = true
	if b.root != nil {
		return b.root.Close()
	}
	return nil
}
