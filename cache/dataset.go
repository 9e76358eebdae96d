package cache

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/sluicedata/sluice/storage"
)

// File is one file of a shard: its raw (uncompressed) form and, when the
// source stores it compressed, its compressed ("zip") form.
type File struct {
	// Raw is the raw file's path relative to the dataset directory (and
	// its key relative to the Bucket), slash-separated.
	Raw string
	// RawBytes is the raw file's exact size.
	RawBytes int64
	// Zip is the compressed file's relative path; empty when the file is
	// stored uncompressed.
	Zip string
	// ZipBytes is the compressed file's exact size.
	ZipBytes int64
	// Compression names the codec of Zip (for example "zstd:7"); it is
	// passed to Source.Decompress.
	Compression string
	// Verify, when set, checks the downloaded bytes: the compressed file
	// when Zip is set, else the raw file (MosaicML's validate_hash). It
	// reads r to the end and returns an error on mismatch.
	Verify func(r io.Reader) error
}

// Shard is one unit of caching and leasing: one or more files that are
// fetched, leased and evicted together (an MDS shard has one file; JSON
// and CSV shards have a data file and a meta file).
type Shard struct {
	// Files lists the shard's files; the first one's raw form carries the
	// shard's lease lock.
	Files []File
}

// Source describes a dataset for Add.
type Source struct {
	// Dir is the dataset's directory relative to the cache root, slash-
	// separated; empty means the root itself.
	Dir string
	// Bucket is where missing files are downloaded from. Nil means the
	// dataset exists only locally: its files are never fetched, deleted
	// or evicted.
	Bucket storage.Bucket
	// Shards lists the dataset's shards; a shard's ID is its index.
	Shards []Shard
	// KeepZip keeps compressed files after decompression (MosaicML's
	// keep_zip). Always true for a local-only dataset.
	KeepZip bool
	// Decompress writes the decompressed form of src (compressed with
	// compression) to dst; rawBytes is the expected output size, which it
	// must not exceed. Required when any File has a Zip.
	Decompress func(compression string, dst io.Writer, src io.Reader, rawBytes int64) error
	// Attempts is the total number of download attempts per file
	// (MosaicML's download_retry). Zero means 2.
	Attempts int
	// AttemptTimeout bounds one download attempt (MosaicML's
	// download_timeout). Zero means 60 s.
	AttemptTimeout time.Duration
	// Backoff returns the pause before attempt i+1 (i ≥ 1). Nil means
	// 500 ms·2^(i-1), at most 10 s.
	Backoff func(i int) time.Duration
}

// Dataset is one dataset registered with a Cache. It is safe for
// concurrent use.
type Dataset struct {
	c      *Cache
	src    Source
	dir    string // absolute
	remote bool
	// st is guarded by c.mu.
	st []shardState

	stats counters
}

// shardState is a shard's in-process state, guarded by Cache.mu.
type shardState struct {
	refs    int      // leases held in this process
	f       *os.File // first raw file, flock'ed shared while refs > 0
	flight  *flight  // fetch in progress in this process
	lastUse int64    // Cache.clock at the last lease
	// early: the leases read the flight's complete temporary files (f is
	// one of them, not locked) while they are synced and renamed; the
	// flight hands f a shared lock once they are in place.
	early bool
}

// flight is one in-progress fetch shared by every caller in the process.
type flight struct {
	done   chan struct{}
	err    error
	demand bool // started by Acquire (may wait for space), not Prefetch
	// ready is closed when the shard's raw files are complete and
	// verified under their temporary paths (set before), while they are
	// still being synced and renamed. It is never closed when the fetch
	// writes only some of the files or fails before.
	ready chan struct{}
	paths []string
	// handedOff is set (under Cache.mu) once the leases of this flight
	// hold the shared lock of the renamed file: no early lease after that.
	handedOff bool

	// The fields below, guarded by Cache.mu, pin the shard for the callers
	// waiting for this flight (see Dataset.pin), so that none of them can
	// lose it to an eviction between the end of the fetch and its lease.
	//
	// waiters counts callers waiting for the flight that have not leased
	// the shard yet; pinned counts leases (refs) the flight took on their
	// behalf, each one claimed or given back by one waiter. sealed is set
	// once the flight has pinned: later callers lease directly (from hold
	// when nobody else holds the shard). hold is the shard's first raw
	// file with a shared lock, kept by the flight until it ends.
	waiters, pinned int
	sealed          bool
	hold            *os.File
}

// Add registers a dataset with the cache and reconciles its files on disk:
// files whose size differs from the declared one are deleted, and so is a
// compressed file whose raw form is present unless KeepZip. It does not
// download anything.
func (c *Cache) Add(ctx context.Context, src *Source) (*Dataset, error) {
	s := *src
	if s.Attempts <= 0 {
		s.Attempts = 2
	}
	if s.AttemptTimeout <= 0 {
		s.AttemptTimeout = 60 * time.Second
	}
	if s.Backoff == nil {
		s.Backoff = defaultBackoff
	}
	if s.Bucket == nil {
		s.KeepZip = true
	}
	if s.Dir != "" && !filepath.IsLocal(filepath.FromSlash(s.Dir)) {
		return nil, fmt.Errorf("cache %s: dataset directory %q leaves the cache root", c.dir, s.Dir)
	}
	for i, sh := range s.Shards {
		if len(sh.Files) == 0 {
			return nil, fmt.Errorf("cache %s: dataset %q: shard %d has no files", c.dir, s.Dir, i)
		}
		for _, f := range sh.Files {
			if err := checkRel(f.Raw); err != nil {
				return nil, fmt.Errorf("cache %s: dataset %q: shard %d: %w", c.dir, s.Dir, i, err)
			}
			if f.RawBytes < 0 || f.ZipBytes < 0 {
				return nil, fmt.Errorf("cache %s: dataset %q: shard %d: negative size", c.dir, s.Dir, i)
			}
			if f.Zip != "" {
				if err := checkRel(f.Zip); err != nil {
					return nil, fmt.Errorf("cache %s: dataset %q: shard %d: %w", c.dir, s.Dir, i, err)
				}
				if s.Decompress == nil {
					return nil, fmt.Errorf("cache %s: dataset %q: shard %d is compressed but Source.Decompress is nil", c.dir, s.Dir, i)
				}
			}
		}
	}
	dir := filepath.Join(c.dir, filepath.FromSlash(s.Dir))
	if d, err := c.lookup(dir, &s); d != nil || err != nil {
		return d, err
	}
	d := &Dataset{
		c: c, src: s, dir: dir,
		remote: s.Bucket != nil, st: make([]shardState, len(s.Shards)),
	}
	if err := os.MkdirAll(d.dir, d.c.opts.dirMode()); err != nil {
		return nil, fmt.Errorf("cache %s: %w", c.dir, err)
	}
	if d.remote {
		err := c.locked(ctx, func() error {
			if err := d.reconcile(); err != nil {
				return err
			}
			if err := d.writeManifest(); err != nil {
				return err
			}
			n, err := c.recount()
			if err != nil {
				return err
			}
			return c.writeUsage(n)
		})
		if err != nil {
			return nil, err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	for _, o := range c.datasets {
		if o.dir == d.dir { // added concurrently
			return o, nil
		}
	}
	c.datasets = append(c.datasets, d)
	return d, nil
}

// lookup returns the dataset already registered for dir, which must
// describe the same shards (several jobs reading one dataset share it).
func (c *Cache) lookup(dir string, s *Source) (*Dataset, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, d := range c.datasets {
		if d.dir != dir {
			continue
		}
		same := len(d.src.Shards) == len(s.Shards) && (d.src.Bucket == nil) == (s.Bucket == nil)
		for i := 0; same && i < len(s.Shards); i++ {
			a, b := d.src.Shards[i].Files, s.Shards[i].Files
			same = len(a) == len(b) && a[0].Raw == b[0].Raw && a[0].RawBytes == b[0].RawBytes
		}
		if !same {
			return nil, fmt.Errorf("cache %s: directory %q is already registered with different shards", c.dir, s.Dir)
		}
		return d, nil
	}
	return nil, nil
}

func checkRel(p string) error {
	if p == "" || !filepath.IsLocal(filepath.FromSlash(p)) {
		return fmt.Errorf("file name %q is not a relative path inside the dataset", p)
	}
	return nil
}

func defaultBackoff(i int) time.Duration {
	d := 500 * time.Millisecond << min(i-1, 5)
	return min(d, 10*time.Second)
}

// reconcile applies the size check and keep_zip rule to files already on
// disk. Files someone holds locked are left alone. Call under the
// directory lock.
func (d *Dataset) reconcile() error {
	dir, err := os.Open(d.dir)
	if err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	defer dir.Close()
	for _, sh := range d.src.Shards {
		for _, f := range sh.Files {
			rawOK, err := d.checkSize(dir, f.Raw, f.RawBytes)
			if err != nil {
				return err
			}
			if f.Zip == "" {
				continue
			}
			zipOK, err := d.checkSize(dir, f.Zip, f.ZipBytes)
			if err != nil {
				return err
			}
			if rawOK && zipOK && !d.src.KeepZip {
				if _, err := removeUnlocked(d.path(f.Zip)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// checkSize reports whether rel exists with the declared size, deleting it
// (when unlocked) if its size is wrong. dir is the dataset's directory,
// open.
func (d *Dataset) checkSize(dir *os.File, rel string, want int64) (bool, error) {
	size, ok, err := statAt(dir, d.dir, filepath.FromSlash(rel), true)
	if err != nil {
		return false, fmt.Errorf("cache: %w", err)
	}
	if !ok {
		return false, nil
	}
	if size == want {
		return true, nil
	}
	_, err = removeUnlocked(d.path(rel))
	return false, err
}

// removeUnlocked deletes path unless another open file holds a lock on it.
func removeUnlocked(path string) (bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("cache: %w", err)
	}
	defer f.Close()
	ok, err := tryLock(f, true)
	if err != nil || !ok {
		return false, err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("cache: %w", err)
	}
	return true, nil
}

// Len returns the number of shards.
func (d *Dataset) Len() int { return len(d.src.Shards) }

// Dir returns the dataset's absolute local directory.
func (d *Dataset) Dir() string { return d.dir }

// Stats returns cumulative figures for this dataset in this process.
func (d *Dataset) Stats() Stats { return d.stats.snapshot() }

// Footprint returns the most bytes shard occupies at once while it is
// fetched (raw plus compressed forms).
func (d *Dataset) Footprint(shard int) int64 {
	var n int64
	for _, f := range d.src.Shards[shard].Files {
		n += f.RawBytes
		if f.Zip != "" {
			n += f.ZipBytes
		}
	}
	return n
}

// MaxFootprint returns the largest Footprint over the dataset's shards.
func (d *Dataset) MaxFootprint() int64 {
	var m int64
	for i := range d.src.Shards {
		m = max(m, d.Footprint(i))
	}
	return m
}

// CheckLimit fails with a *LimitError when the cache limit cannot hold
// leases on holders shards at once plus one shard being fetched, besides
// reserved bytes already taken by other files (the dataset's index, for
// example). It is a no-op without a limit or for a local-only dataset.
func (d *Dataset) CheckLimit(holders int, reserved int64) error {
	lim := d.c.opts.Limit
	if lim == 0 || !d.remote {
		return nil
	}
	m := d.MaxFootprint()
	need := reserved + int64(holders+1)*m
	if need > lim {
		return &LimitError{Dir: d.c.dir, Limit: lim, Min: need,
			Reason: fmt.Sprintf("%d leased shards plus one being fetched, of up to %d bytes each, plus %d bytes of indexes", holders, m, reserved)}
	}
	return nil
}

func (d *Dataset) path(rel string) string { return filepath.Join(d.dir, filepath.FromSlash(rel)) }

// lockPath names the per-shard fetch lock file.
func (d *Dataset) lockPath(shard int) string {
	h := fnv.New64a()
	h.Write([]byte(d.dir))
	h.Write([]byte{0})
	h.Write([]byte(d.src.Shards[shard].Files[0].Raw))
	return filepath.Join(d.c.dir, metaDir, "locks", fmt.Sprintf("%016x", h.Sum64()))
}

// where names a shard file and its store for messages.
func (d *Dataset) where(rel string) string {
	if d.remote {
		return fmt.Sprintf("%s (from %s)", d.path(rel), d.src.Bucket.URL(rel))
	}
	return d.path(rel) + " (local only)"
}

// Lease keeps a shard's files in the cache until Release. Its methods are
// safe for concurrent use; Release must be called exactly once.
type Lease struct {
	d     *Dataset
	shard int
	hit   bool
	done  bool
	fl    *flight // the fetch whose temporary files the lease reads, if any
}

// Hit reports whether the shard was already local when the lease was
// requested (no fetch was waited for).
func (l *Lease) Hit() bool { return l.hit }

// Shard returns the leased shard's ID.
func (l *Lease) Shard() int { return l.shard }

// Path returns the absolute path of the raw form of the shard's i-th file.
// The file exists there, complete, from Committed until Release.
func (l *Lease) Path(i int) string { return l.d.path(l.d.src.Shards[l.shard].Files[i].Raw) }

// ReadPath returns where the shard's i-th raw file can be read now: Path,
// or, for a lease granted while the fetch is still syncing and renaming
// the complete files, their temporary path. Open it at once: when opening
// it fails with fs.ErrNotExist, the file has been renamed meanwhile (the
// same complete bytes are at Path; Committed waits for that).
func (l *Lease) ReadPath(i int) string {
	if l.fl != nil {
		c := l.d.c
		c.mu.Lock()
		early := l.d.st[l.shard].early && l.d.st[l.shard].flight == l.fl
		c.mu.Unlock()
		if early {
			return l.fl.paths[i]
		}
	}
	return l.Path(i)
}

// Committed waits until the shard's files are in place under Path (they
// are, at once, for a lease not granted early) and returns the error
// that prevented it, if any: the lease's bytes stay readable through
// files opened before, but the shard is then not in the cache.
func (l *Lease) Committed(ctx context.Context) error {
	if l.fl == nil {
		return nil
	}
	select {
	case <-l.fl.done:
		return l.fl.err
	case <-ctx.Done():
		return fmt.Errorf("cache: waiting for %s to be committed: %w", l.d.where(l.d.src.Shards[l.shard].Files[0].Raw), ctx.Err())
	}
}

// File returns the first raw file, open read-only. It stays open until the
// last lease on the shard in this process is released; callers must not
// close it.
func (l *Lease) File() *os.File {
	l.d.c.mu.Lock()
	defer l.d.c.mu.Unlock()
	return l.d.st[l.shard].f
}

// Release gives the lease back. Calls after the first are no-ops.
func (l *Lease) Release() {
	c := l.d.c
	c.mu.Lock()
	if l.done {
		c.mu.Unlock()
		return
	}
	l.done = true
	st := &l.d.st[l.shard]
	st.refs--
	var f *os.File
	if st.refs == 0 {
		f, st.f = st.f, nil
		st.early = false
	}
	c.mu.Unlock()
	if f != nil {
		f.Close() // drops the shared flock
		c.signal()
	}
}

// Acquire returns a lease on shard, fetching it first if it is not local.
// It waits for another goroutine's or process's fetch of the same shard
// rather than downloading it again, and for cache space when every
// candidate for eviction is in use, up to Options.WaitTimeout.
func (d *Dataset) Acquire(ctx context.Context, shard int) (*Lease, error) {
	l, err := d.AcquireEarly(ctx, shard)
	if err != nil {
		return nil, err
	}
	if err := l.Committed(ctx); err != nil {
		l.Release()
		return nil, err
	}
	return l, nil
}

// AcquireEarly is Acquire for a consumer that reads the shard's files
// through Lease.ReadPath or Lease.File: when it waits for a fetch, it
// returns as soon as every byte of the shard is written and verified in
// the fetch's temporary files, while they are still being synced and
// renamed into place (Lease.Committed waits for that). No reader ever sees
// a partial file, and a crash before the rename still leaves only
// temporary files, which a restart discards.
func (d *Dataset) AcquireEarly(ctx context.Context, shard int) (*Lease, error) {
	return d.acquireEarly(ctx, shard, nil)
}

// acquireEarly is AcquireEarly; a fetch it starts downloads through via
// (nil: the Source's Bucket).
func (d *Dataset) acquireEarly(ctx context.Context, shard int, via storage.Bucket) (*Lease, error) {
	if shard < 0 || shard >= len(d.st) {
		return nil, fmt.Errorf("cache %s: shard %d out of range [0, %d)", d.dir, shard, len(d.st))
	}
	c := d.c
	start := time.Now()
	missed := false
	defer func() {
		if missed {
			w := time.Since(start).Nanoseconds()
			c.stats.waitNanos.Add(w)
			d.stats.waitNanos.Add(w)
		}
	}()
	for attempt := 0; ; attempt++ {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, ErrClosed
		}
		st := &d.st[shard]
		if st.refs > 0 {
			l := d.leaseLocked(shard, !missed)
			c.mu.Unlock()
			d.count(missed)
			return l, nil
		}
		fl := st.flight
		c.mu.Unlock()
		if fl != nil {
			missed = true
			l, err := d.await(ctx, shard, fl)
			if l != nil || err != nil {
				return l, err
			}
			continue // a failed prefetch: fetch on demand next
		}
		f, err := d.openLeased(ctx, shard, true)
		if err != nil {
			return nil, err
		}
		if f != nil {
			c.mu.Lock()
			st := &d.st[shard]
			if st.refs > 0 {
				f.Close()
			} else {
				st.f = f
			}
			st.refs++
			c.clock++
			st.lastUse = c.clock
			c.mu.Unlock()
			d.count(missed)
			return &Lease{d: d, shard: shard, hit: !missed}, nil
		}
		if attempt >= 8 {
			return nil, fmt.Errorf("cache: %s was evicted %d times before it could be leased; the cache limit is too low for this access pattern", d.where(d.src.Shards[shard].Files[0].Raw), attempt)
		}
		missed = true
		fl = d.start(shard, 0, true, via)
		if l, err := d.await(ctx, shard, fl); l != nil || err != nil {
			return l, err
		}
	}
}

// await waits for flight fl of shard. It returns an early lease when the
// flight's files become readable first (see AcquireEarly), the lease the
// flight pinned for this caller once the shard is complete, the flight's
// error when it was a demand fetch, and nil, nil when the caller should
// look again (the flight had ended, a prefetch failed, or the shard was
// gone when the flight ended: another process evicted it).
func (d *Dataset) await(ctx context.Context, shard int, fl *flight) (*Lease, error) {
	c := d.c
	c.mu.Lock()
	st := &d.st[shard]
	switch {
	case st.flight != fl:
		c.mu.Unlock()
		return nil, nil // ended meanwhile
	case fl.sealed:
		// The flight has pinned the shard already: lease it directly.
		if st.refs == 0 && fl.hold != nil {
			st.f, fl.hold = fl.hold, nil
		}
		if st.refs > 0 {
			l := d.leaseLocked(shard, false)
			c.mu.Unlock()
			d.count(true)
			return l, nil
		}
		// Nothing to pin (the shard was gone): look again once it ends.
		c.mu.Unlock()
		select {
		case <-fl.done:
			return d.result(fl)
		case <-ctx.Done():
			return nil, d.waitErr(shard, ctx)
		}
	}
	fl.waiters++
	c.mu.Unlock()
	select {
	case <-fl.done:
	case <-fl.ready:
		l, err := d.leaseEarly(shard, fl)
		if l != nil {
			d.count(true)
			return l, nil
		}
		if err != nil {
			d.unwait(shard, fl)
			return nil, err
		}
		// Handed off or ended meanwhile: the flight pins the shard.
		select {
		case <-fl.done:
		case <-ctx.Done():
			d.unwait(shard, fl)
			return nil, d.waitErr(shard, ctx)
		}
	case <-ctx.Done():
		d.unwait(shard, fl)
		return nil, d.waitErr(shard, ctx)
	}
	c.mu.Lock()
	if fl.pinned > 0 {
		fl.pinned--
		c.clock++
		d.st[shard].lastUse = c.clock
		c.mu.Unlock()
		d.count(true)
		return &Lease{d: d, shard: shard}, nil
	}
	fl.waiters-- // not pinned: the flight failed or found no shard
	c.mu.Unlock()
	return d.result(fl)
}

// result is what await returns for an ended flight that pinned nothing.
func (d *Dataset) result(fl *flight) (*Lease, error) {
	if fl.err != nil && fl.demand {
		return nil, fl.err
	}
	return nil, nil
}

func (d *Dataset) waitErr(shard int, ctx context.Context) error {
	return fmt.Errorf("cache: waiting for %s: %w", d.where(d.src.Shards[shard].Files[0].Raw), ctx.Err())
}

// unwait withdraws a waiter of flight fl that gives up: it gives back the
// lease the flight pinned for it, if any.
func (d *Dataset) unwait(shard int, fl *flight) {
	c := d.c
	c.mu.Lock()
	if fl.pinned == 0 {
		fl.waiters--
		c.mu.Unlock()
		return
	}
	fl.pinned--
	st := &d.st[shard]
	st.refs--
	var f *os.File
	if st.refs == 0 {
		f, st.f = st.f, nil
		st.early = false
	}
	c.mu.Unlock()
	if f != nil {
		f.Close()
		c.signal()
	}
}

// leaseLocked adds a lease on shard, which is leased already (refs > 0).
// Call under Cache.mu.
func (d *Dataset) leaseLocked(shard int, hit bool) *Lease {
	c := d.c
	st := &d.st[shard]
	st.refs++
	c.clock++
	st.lastUse = c.clock
	l := &Lease{d: d, shard: shard, hit: hit}
	if st.early {
		l.fl = st.flight
	}
	return l
}

// pin ends flight fl's work on shard, which it has just made complete (or
// found complete): it opens the shard with a shared lock and takes a lease
// on behalf of every caller waiting for fl, so that nothing (in this
// process or another) can evict the shard before they have it. Callers
// that come later lease it directly (see await). The flight calls pin
// while it still holds the shard's fetch lock where it has it, so no other
// process can evict the shard in between either. A shard that is gone (a
// flight that waited for another process's fetch can find it evicted
// already) pins nothing: its waiters look again.
func (d *Dataset) pin(ctx context.Context, shard int, fl *flight) {
	if fl == nil {
		return
	}
	c := d.c
	c.mu.Lock()
	sealed := fl.sealed
	c.mu.Unlock()
	if sealed {
		return
	}
	if h := c.beforePin; h != nil {
		h(shard)
	}
	// Never waits: with the fetch lock held nobody holds the file
	// exclusively; otherwise the waiters look again (and wait) themselves.
	f, err := d.openLeased(ctx, shard, false)
	if err != nil {
		f = nil // the waiters look again and meet the error themselves
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if fl.sealed {
		if f != nil {
			f.Close()
		}
		return
	}
	fl.sealed = true
	st := &d.st[shard]
	if fl.waiters > 0 && (st.refs > 0 || f != nil) {
		if st.refs == 0 {
			// The waiters' leases hold the file just opened. (This once
			// kept the file without counting the waiters' leases: they
			// looked again and leased it anew, and its shared lock stayed
			// until the garbage collector closed it, so a restart's size
			// check could not remove the shard.)
			st.f, f = f, nil
			st.early = false
		}
		st.refs += fl.waiters
		fl.pinned += fl.waiters
		fl.waiters = 0
	}
	fl.hold = f
}

// leaseEarly leases shard on the complete temporary files of flight fl,
// which is syncing and renaming them. It returns nil when the flight has
// ended (or renamed the first file) meanwhile: the caller then leases the
// files in place. The flight keeps the shard from eviction until it hands
// the leases a shared lock on the renamed file.
func (d *Dataset) leaseEarly(shard int, fl *flight) (*Lease, error) {
	f, err := os.Open(fl.paths[0])
	if errors.Is(err, fs.ErrNotExist) {
		// Renamed meanwhile: until the hand-off, the flight still keeps
		// it from eviction under its final name.
		f, err = os.Open(d.path(d.src.Shards[shard].Files[0].Raw))
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("cache: open %s: %w", fl.paths[0], err)
	}
	c := d.c
	c.mu.Lock()
	st := &d.st[shard]
	if st.flight != fl || fl.handedOff || fl.sealed || c.closed {
		c.mu.Unlock()
		f.Close()
		return nil, nil
	}
	fl.waiters--
	if st.refs > 0 {
		f.Close()
	} else {
		st.f = f
		st.early = true
	}
	st.refs++
	c.clock++
	st.lastUse = c.clock
	l := &Lease{d: d, shard: shard, hit: false}
	if st.early {
		l.fl = fl
	}
	c.mu.Unlock()
	return l, nil
}

func (d *Dataset) count(missed bool) {
	if missed {
		d.c.stats.misses.Add(1)
		d.stats.misses.Add(1)
	} else {
		d.c.stats.hits.Add(1)
		d.stats.hits.Add(1)
	}
}

// Prefetch fetches shard in the background if it is not local, without
// leasing it. distance is how many samples ahead of its consumer the shard
// is needed; the fetch evicts only shards needed later than that, and
// fails with ErrNoSpace instead of waiting when there is no such room.
// The returned channel is closed when the fetch ends; the error, if any,
// is then available from the returned func.
func (d *Dataset) Prefetch(shard int, distance int64) (done <-chan struct{}, err func() error) {
	return d.prefetch(shard, distance, nil)
}

// prefetch is Prefetch; the fetch downloads through via (nil: the
// Source's Bucket).
func (d *Dataset) prefetch(shard int, distance int64, via storage.Bucket) (done <-chan struct{}, err func() error) {
	if shard < 0 || shard >= len(d.st) {
		ch := make(chan struct{})
		close(ch)
		e := fmt.Errorf("cache %s: shard %d out of range [0, %d)", d.dir, shard, len(d.st))
		return ch, func() error { return e }
	}
	fl := d.start(shard, max(distance, 1), false, via)
	return fl.done, func() error { return fl.err }
}

// Present reports whether shard's raw files are all in the directory. It
// is a snapshot: another process may evict the shard right after.
func (d *Dataset) Present(shard int) bool {
	for _, f := range d.src.Shards[shard].Files {
		fi, err := os.Stat(d.path(f.Raw))
		if err != nil || fi.Size() != f.RawBytes {
			return false
		}
	}
	return true
}

// start joins the shard's in-process flight or starts one, downloading
// through via (nil: the Source's Bucket).
func (d *Dataset) start(shard int, distance int64, demand bool, via storage.Bucket) *flight {
	c := d.c
	c.mu.Lock()
	st := &d.st[shard]
	if st.flight != nil {
		fl := st.flight
		c.mu.Unlock()
		return fl
	}
	fl := &flight{done: make(chan struct{}), demand: demand, ready: make(chan struct{})}
	if c.closed {
		fl.err = ErrClosed
		close(fl.done)
		c.mu.Unlock()
		return fl
	}
	st.flight = fl
	c.wg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.wg.Done()
		ctx := c.bg
		if via != nil {
			ctx = context.WithValue(ctx, viaKey{}, via)
		}
		err := d.fetch(ctx, shard, distance, demand, fl, func(paths []string) {
			c.mu.Lock()
			fl.paths = paths
			close(fl.ready)
			c.mu.Unlock()
		})
		if err == nil {
			d.pin(c.bg, shard, fl) // when fetch returned before its own pin
		}
		c.mu.Lock()
		d.st[shard].flight = nil
		d.st[shard].early = false
		fl.err = err
		if fl.hold != nil {
			fl.hold.Close() // before done: a lease's Release then frees the shard
			fl.hold = nil
		}
		close(fl.done)
		c.mu.Unlock()
		if h := c.afterFlight; h != nil {
			h(shard)
		}
		c.signal()
	}()
	return fl
}

// openLeased opens the shard's first raw file with a shared lock if the
// shard is complete on disk, or returns nil if it is not. Without wait, it
// also returns nil when the file is locked exclusively.
func (d *Dataset) openLeased(ctx context.Context, shard int, wait bool) (*os.File, error) {
	files := d.src.Shards[shard].Files
	p := d.path(files[0].Raw)
	for {
		f, err := os.Open(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("cache: open %s: %w", d.where(files[0].Raw), err)
		}
		// An exclusive holder is evicting it or has just renamed it into
		// place; both finish promptly.
		if !wait {
			ok, err := tryLock(f, false)
			if err != nil || !ok {
				f.Close()
				return nil, err
			}
		} else {
			lctx, cancel := context.WithTimeout(ctx, d.c.opts.WaitTimeout)
			err = lockWait(lctx, f, false)
			cancel()
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("cache: lease %s: %w", d.where(files[0].Raw), err)
		}
		same, err := sameFile(f, p)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("cache: lease %s: %w", d.where(files[0].Raw), err)
		}
		if !same {
			f.Close()
			continue // evicted or replaced meanwhile; look again
		}
		fi, err := f.Stat()
		if err != nil || fi.Size() != files[0].RawBytes {
			f.Close()
			if err != nil {
				return nil, fmt.Errorf("cache: lease %s: %w", d.where(files[0].Raw), err)
			}
			if !d.remote {
				return nil, fmt.Errorf("cache: %s has %d bytes, the index says %d", d.where(files[0].Raw), fi.Size(), files[0].RawBytes)
			}
			return nil, nil
		}
		for _, rf := range files[1:] {
			fi, err := os.Stat(d.path(rf.Raw))
			if err != nil || fi.Size() != rf.RawBytes {
				f.Close()
				return nil, nil
			}
		}
		return f, nil
	}
}
