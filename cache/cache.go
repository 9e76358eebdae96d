package cache

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// Errors callers branch on.
var (
	// ErrNoSpace reports that a shard cannot fit under the limit because
	// everything that could make room is in use (leased or being fetched),
	// or, for a prefetch, needed sooner than the shard being fetched.
	ErrNoSpace = errors.New("cache: no space under cache limit")
	// ErrLimitTooSmall reports a limit that cannot hold the working set; the
	// error's text gives the minimum that would work (see LimitError).
	ErrLimitTooSmall = errors.New("cache: cache limit too small")
	// ErrNotLocal reports a shard of a local-only dataset (no Bucket) whose
	// files are missing.
	ErrNotLocal = errors.New("cache: shard missing from local-only dataset")
	// ErrClosed reports use of a Cache after Close.
	ErrClosed = errors.New("cache: closed")
	// ErrBusy reports that another process is writing the same file.
	ErrBusy = errors.New("cache: file is being written by another process")
)

// LimitError reports a cache limit below the minimum a dataset needs. It
// matches ErrLimitTooSmall.
type LimitError struct {
	// Dir is the cache directory.
	Dir string
	// Limit is the configured limit in bytes.
	Limit int64
	// Min is the smallest limit that would work, in bytes.
	Min int64
	// Reason says how Min was computed.
	Reason string
}

// Error names the cache directory, the limit, the minimum that would work
// and how that minimum was computed.
func (e *LimitError) Error() string {
	return fmt.Sprintf("cache %s: cache limit %d bytes (%s) is too small: at least %d bytes (%s) are needed: %s",
		e.Dir, e.Limit, FormatBytes(e.Limit), e.Min, FormatBytes(e.Min), e.Reason)
}

// Is reports whether target is ErrLimitTooSmall.
func (e *LimitError) Is(target error) bool { return target == ErrLimitTooSmall }

// Options tunes a Cache. A nil *Options means the defaults.
type Options struct {
	// Limit is the most bytes the directory may hold at any instant,
	// counted across every process sharing it. Zero or negative: no limit
	// (nothing is ever evicted).
	Limit int64
	// WaitTimeout bounds every wait: for space, for another process's
	// download of the same shard, for locks. Zero means 10 minutes.
	WaitTimeout time.Duration
	// LockTimeout bounds the wait for the directory-wide lock, which is
	// only ever held for short work: a process holding it longer is hung
	// or hostile, and the error names it (pid and command, from
	// /proc/locks) instead of waiting for WaitTimeout. Zero means 10s.
	LockTimeout time.Duration
	// SharedGroup makes the cache usable by every member of its
	// directory's group: directories 0770 with the set-group-ID bit (new
	// files inherit the group), files 0660. The default is owner-only:
	// directories 0700, files 0600, so other local users can neither read
	// cached data nor take the cache's locks.
	SharedGroup bool
	// Memory is how many bytes of memory the Cache may use to hold shards
	// it fetches (single-file shards without compression): each is
	// downloaded into memory, read from there by this process's leases
	// (Lease.Bytes), and written to its file with direct I/O where the
	// file system takes it, bypassing the page cache; the copy is dropped
	// once the last lease that read it is released, or for room. A shard
	// that does not fit is fetched through its file as without. Zero or
	// negative: none (every shard goes through the page cache, where
	// readers in other processes find it). After Close the Cache's free
	// blocks, at most Memory bytes, wait a minute for the next Cache of
	// the process (fresh memory costs its zeroing and page faults).
	Memory int64
}

// Permissions of the cache's directories and files.
const (
	privateDirMode  = 0o700
	privateFileMode = 0o600
	sharedDirMode   = 0o770 | os.ModeSetgid
	sharedFileMode  = 0o660
)

func (o *Options) dirMode() os.FileMode {
	if o.SharedGroup {
		return sharedDirMode
	}
	return privateDirMode
}

func (o *Options) fileMode() os.FileMode {
	if o.SharedGroup {
		return sharedFileMode
	}
	return privateFileMode
}

func (o *Options) withDefaults() Options {
	var r Options
	if o != nil {
		r = *o
	}
	if r.Limit < 0 {
		r.Limit = 0
	}
	if r.WaitTimeout <= 0 {
		r.WaitTimeout = 10 * time.Minute
	}
	if r.LockTimeout <= 0 {
		r.LockTimeout = 10 * time.Second
	}
	r.LockTimeout = min(r.LockTimeout, r.WaitTimeout)
	return r
}

// metaDir is the cache's private directory under its root.
const metaDir = ".sluice"

// partSuffix marks a file being written; it is renamed when complete.
const partSuffix = ".part"

// Cache is a node-local shard cache rooted at one directory. It is safe for
// concurrent use; several Caches (in one or many processes) may share one
// directory.
type Cache struct {
	dir  string
	opts Options

	// glock serialises this process's holders of the directory-wide flock
	// on lockFile (flock is per open file, not per goroutine).
	glock sync.Mutex
	// recountDue (guarded by glock) is set until the byte count has been
	// rebuilt from the directory since Open (see readUsage).
	recountDue bool
	lockFile   *os.File
	// usageFile holds the byte counter (8 bytes, little endian), read and
	// written only under the directory-wide lock.
	usageFile *os.File

	// beforeCommit, when set (by tests only), runs on a fetch between
	// its ready signal and its commits.
	beforeCommit func(shard int)
	// beforePin and afterFlight, when set (by tests only), run on a
	// successful fetch before it pins the shard for its waiters, and on
	// every fetch after it has ended (its waiters released).
	beforePin, afterFlight func(shard int)
	// noDirect and directHook, when set (by tests only), write shards
	// fetched in memory through the page cache, or replace their direct
	// write.
	noDirect   bool
	directHook func(f *os.File, b []byte) error
	// mem holds the shards fetched in memory (guarded by mu).
	mem memPool

	// behind holds the WriteFileBehind writes in progress.
	behind behindWrites
	// ahead queues the lock files to create ahead of their fetches
	// (PrepareFetch); made, with its goroutine, at the first request
	// (under mu).
	ahead chan lockAhead

	// bg is the lifetime of background fetches; cancelled by Close.
	bg     context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// mu guards the fields below and every Dataset's shard states.
	mu       sync.Mutex
	closed   bool
	datasets []*Dataset
	// pending lists the datasets whose registration pass over their
	// files on disk has not run yet (see settle); settleSoon is set while
	// settleLater waits to run it.
	pending    []*Dataset
	settleSoon bool
	futures    map[*futureReg]struct{}
	// wake is closed (and replaced) whenever space may have been freed in
	// this process: a lease released, a shard evicted, a fetch finished.
	wake chan struct{}
	// wakeOut is set while wake has been handed out (wakeChan).
	wakeOut bool
	// clock orders accesses for LRU.
	clock int64
	// holds are the idle holds (idlehold.go).
	holds idleHolds
	// gen counts signals; refusals remembers the last prefetch refused
	// for space, so that prefetches needed no sooner fail without
	// rescanning until something changes in this process.
	gen      int64
	refusals Refusals

	stats counters
}

// counters are the cache-wide figures.
type counters struct {
	hits, misses, downloads, bytesFetched, evictions, evictedBytes, waitNanos atomic.Int64
}

// Stats are cumulative figures for a Cache or a Dataset.
type Stats struct {
	// Hits counts leases granted on a shard that was already local.
	Hits int64
	// Misses counts leases that had to wait for a fetch (download or
	// decompression), by this process or another.
	Misses int64
	// Downloads counts files downloaded by this process.
	Downloads int64
	// BytesFetched counts bytes downloaded by this process.
	BytesFetched int64
	// Evictions counts shards evicted by this process.
	Evictions int64
	// EvictedBytes counts bytes freed by those evictions.
	EvictedBytes int64
	// Wait is the total time Acquire calls spent waiting for shards.
	Wait time.Duration
}

func (c *counters) snapshot() Stats {
	return Stats{
		Hits: c.hits.Load(), Misses: c.misses.Load(), Downloads: c.downloads.Load(),
		BytesFetched: c.bytesFetched.Load(), Evictions: c.evictions.Load(),
		EvictedBytes: c.evictedBytes.Load(), Wait: time.Duration(c.waitNanos.Load()),
	}
}

// Open opens (creating if needed) the cache rooted at dir. The byte count
// is rebuilt from the directory, deleting temporary files left by dead
// processes, by the Cache's first use of it under the directory lock
// (Usage or a fetch's reservation; a dataset registered before then
// rebuilds it in the pass over its own files, see Add: opening a cache
// and registering a 40k-shard dataset stat each file once, not twice).
// opts may be nil.
func Open(ctx context.Context, dir string, opts *Options) (*Cache, error) {
	o := opts.withDefaults()
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("cache %s: %w", dir, err)
	}
	if err := os.MkdirAll(filepath.Join(abs, metaDir, "locks"), o.dirMode()); err != nil {
		return nil, fmt.Errorf("cache %s: %w", abs, err)
	}
	// A cache made by an older version (0755/0644) is tightened where this
	// user owns it.
	for _, d := range []string{abs, filepath.Join(abs, metaDir), filepath.Join(abs, metaDir, "locks")} {
		tighten(d, o.dirMode())
	}
	lf, err := os.OpenFile(filepath.Join(abs, metaDir, "lock"), os.O_RDWR|os.O_CREATE, o.fileMode())
	if err != nil {
		return nil, fmt.Errorf("cache %s: %w", abs, err)
	}
	uf, err := os.OpenFile(filepath.Join(abs, metaDir, "usage"), os.O_RDWR|os.O_CREATE, o.fileMode())
	if err != nil {
		lf.Close()
		return nil, fmt.Errorf("cache %s: %w", abs, err)
	}
	tighten(lf.Name(), o.fileMode())
	tighten(uf.Name(), o.fileMode())
	bg, cancel := context.WithCancel(context.Background())
	c := &Cache{
		dir: abs, opts: o, lockFile: lf, usageFile: uf, bg: bg, cancel: cancel,
		futures: make(map[*futureReg]struct{}), wake: make(chan struct{}),
	}
	c.recountDue = true
	c.mem.limit = o.Memory
	c.initHolds()
	// Taking the lock once here still reports at Open a directory
	// another process holds locked (naming it), rather than later.
	if err := c.locked(ctx, func() error { return nil }); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Dir returns the cache's absolute root directory.
func (c *Cache) Dir() string { return c.dir }

// Limit returns the byte limit, zero for none.
func (c *Cache) Limit() int64 { return c.opts.Limit }

// Stats returns cumulative figures for every dataset of this Cache.
func (c *Cache) Stats() Stats { return c.stats.snapshot() }

// Usage returns the bytes the directory holds or has reserved, across all
// processes.
func (c *Cache) Usage(ctx context.Context) (int64, error) {
	var n int64
	err := c.locked(ctx, func() (err error) {
		n, err = c.readUsage()
		return err
	})
	return n, err
}

// Close stops background fetches and releases the Cache's files. Leases
// still held stay valid until released; further Acquire calls fail with
// ErrClosed.
func (c *Cache) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
	c.mu.Lock()
	c.closeMemLocked()
	c.mu.Unlock()
	return errors.Join(c.usageFile.Close(), c.lockFile.Close())
}

// locked runs fn holding the directory-wide lock.
func (c *Cache) locked(ctx context.Context, fn func() error) error {
	c.glock.Lock()
	defer c.glock.Unlock()
	ctx, cancel := context.WithTimeout(ctx, c.opts.LockTimeout)
	defer cancel()
	if err := lockWait(ctx, c.lockFile, true); err != nil {
		return fmt.Errorf("cache %s: %w", c.dir, err)
	}
	defer unlock(c.lockFile)
	c.settle()
	return fn()
}

func (c *Cache) readUsage() (int64, error) {
	if c.recountDue {
		n, err := c.recount()
		if err != nil {
			return 0, err
		}
		if err := c.writeUsage(n); err != nil {
			return 0, err
		}
		c.recountDue = false
		return n, nil
	}
	var b [8]byte
	n, err := c.usageFile.ReadAt(b[:], 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, fmt.Errorf("cache %s: read usage: %w", c.dir, err)
	}
	if n < 8 {
		return 0, nil
	}
	v := int64(binary.LittleEndian.Uint64(b[:]))
	if v < 0 {
		v = 0
	}
	return v, nil
}

func (c *Cache) writeUsage(v int64) error {
	if v < 0 {
		v = 0
	}
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(v))
	if _, err := c.usageFile.WriteAt(b[:], 0); err != nil {
		return fmt.Errorf("cache %s: write usage: %w", c.dir, err)
	}
	return nil
}

// addUsage adds delta to the counter; call under the directory lock.
func (c *Cache) addUsage(delta int64) error {
	v, err := c.readUsage()
	if err != nil {
		return err
	}
	return c.writeUsage(v + delta)
}

// recount sums the sizes of every file under the root except the cache's
// own metadata. A temporary file counts at its size (created at full
// size) while its writer holds its lock; one whose writer is gone is
// deleted. Call under the directory lock.
func (c *Cache) recount() (int64, error) {
	total, err := sumDir(c.dir, true)
	if err != nil {
		return 0, fmt.Errorf("cache %s: recount: %w", c.dir, err)
	}
	return total, nil
}

// removeIfStale deletes a temporary file nobody holds locked (its writer
// died) and reports whether it did.
func removeIfStale(path string) (bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	ok, err := tryLock(f, true)
	if err != nil || !ok {
		return false, err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	return true, nil
}

// signal wakes every goroutine waiting for space in this process.
func (c *Cache) signal() {
	c.mu.Lock()
	c.signalLocked()
	c.mu.Unlock()
}

// signalLocked is signal under Cache.mu. The channel is replaced only
// when wakeChan handed it out: a lease change is cheap when nobody waits.
func (c *Cache) signalLocked() {
	if c.wakeOut {
		close(c.wake)
		c.wake = make(chan struct{})
		c.wakeOut = false
	}
	c.gen++
}

// wakeChan returns the channel the next signal closes.
func (c *Cache) wakeChan() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.wakeOut = true
	return c.wake
}

// FormatBytes renders n bytes with a binary unit, for messages ("1.5 GiB").
func FormatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// WriteFile stores data at rel (slash-separated, relative to the root)
// atomically, counting it against the limit like any shard file (it waits
// for space, evicting as needed). The file is never evicted by the cache.
func (c *Cache) WriteFile(ctx context.Context, rel string, data []byte) error {
	w, err := c.reserveFile(ctx, rel, int64(len(data)))
	if err != nil {
		return err
	}
	return w.write(ctx, data)
}

// reservedFile is a WriteFile whose room is reserved and whose temporary
// file is created and locked: what is left (write, sync, rename) waits for
// nothing but the disk and the directory lock.
type reservedFile struct {
	c *Cache
	p string // the final path
	n int64
	f *os.File
}

// reserveFile takes WriteFile's first step for n bytes at rel: the
// reservation, waiting for space as WriteFile does.
func (c *Cache) reserveFile(ctx context.Context, rel string, n int64) (*reservedFile, error) {
	if err := checkRel(rel); err != nil {
		return nil, fmt.Errorf("cache %s: %w", c.dir, err)
	}
	p := filepath.Join(c.dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), c.opts.dirMode()); err != nil {
		return nil, fmt.Errorf("cache %s: %w", c.dir, err)
	}
	var f *os.File
	wctx, cancel := context.WithTimeout(ctx, c.opts.WaitTimeout)
	defer cancel()
	err := c.reserve(wctx, n, 0, true, nil, -1, func() error {
		var err error
		f, err = os.OpenFile(p+partSuffix, os.O_RDWR|os.O_CREATE, c.opts.fileMode())
		if err != nil {
			return err
		}
		if ok, err := tryLock(f, true); err != nil || !ok {
			f.Close()
			if err == nil {
				err = fmt.Errorf("%w: %s", ErrBusy, p+partSuffix)
			}
			return err
		}
		if err := f.Truncate(0); err != nil {
			f.Close()
			return err
		}
		if err := f.Truncate(n); err != nil {
			f.Close()
			return err
		}
		return c.addUsage(0)
	})
	if err != nil {
		return nil, fmt.Errorf("cache: write %s: %w", p, err)
	}
	return &reservedFile{c: c, p: p, n: n, f: f}, nil
}

// write writes data (the reserved size) into the temporary file, syncs it
// and renames it into place, or removes it and returns its reservation.
// ctx's end does not cut it short.
func (w *reservedFile) write(ctx context.Context, data []byte) error {
	c, p, f := w.c, w.p, w.f
	_, err := f.WriteAt(data, 0)
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = c.locked(context.WithoutCancel(ctx), func() error {
			// Replacing an existing file frees its bytes.
			if fi, err := os.Stat(p); err == nil {
				if err := c.addUsage(-fi.Size()); err != nil {
					return err
				}
			}
			return os.Rename(p+partSuffix, p)
		})
	}
	if err != nil {
		_ = c.locked(context.WithoutCancel(ctx), func() error {
			os.Remove(p + partSuffix)
			return c.addUsage(-w.n)
		})
	}
	f.Close()
	c.signal()
	if err != nil {
		return fmt.Errorf("cache: write %s: %w", p, err)
	}
	return nil
}
