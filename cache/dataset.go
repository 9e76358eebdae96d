package cache

import (
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
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
	// reads r to the end and returns an error on mismatch. Source.VerifyKey
	// names the check.
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
	// VerifyKey names the check its Files' Verify make ("sha1" for
	// validate_hash sha1; "" for none). A later registration of the same
	// directory whose VerifyKey is new to it adds its checks to the
	// downloads of the dataset (see checks.go); one with a key already
	// registered adds nothing.
	VerifyKey string
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
	// InMemory, when set, reports whether the readers of a shard take its
	// bytes from Lease.Bytes when a lease has them: such a shard, when it
	// has one file and no compressed form, is fetched in memory within
	// Options.Memory. Nil: none is.
	InMemory func(shard int) bool
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
	// maxFoot is the largest Footprint (the shards never change).
	maxFoot int64

	// settled (guarded by c.mu) is set once the registration's pass over
	// the files on disk has run (see settle), with its error in
	// settleErr.
	settled   bool
	settleErr error
	// diskKnown (guarded by c.mu) is set when that pass succeeded: from
	// then on a shard's onDisk is set wherever this process saw or put
	// its files in place, so evict passes over the others without a
	// system call (see evict).
	diskKnown bool

	// later holds the checks of later registrations (checks.go).
	later atomic.Pointer[laterChecks]

	// onEvict (guarded by c.mu) is called with a shard this process
	// evicted, after its files are deleted (see OnEvict).
	onEvict map[*func(shard int)]struct{}

	stats counters
}

// OnEvict registers fn to be called with each shard of d this process
// evicts, once its files are deleted, and with each shard this process
// stops protecting from eviction by other processes while no lease holds
// it (its idle hold ends, see idlehold.go): a reader that keeps a shard
// mapped with no lease (a mapping keeps a deleted file's blocks
// allocated) drops it there, so that the bytes the cache counts free are
// free and no mapping outlives the protection of the file it maps. fn
// runs on the evicting goroutine under the cache directory's lock, or on
// the Cache's goroutine that ends holds; it must not call into the Cache
// and must not block. It may be called for a shard more than once, or for
// one that is leased again. The returned func removes fn.
func (d *Dataset) OnEvict(fn func(shard int)) (remove func()) {
	key := &fn
	d.c.mu.Lock()
	if d.onEvict == nil {
		d.onEvict = make(map[*func(shard int)]struct{})
	}
	d.onEvict[key] = struct{}{}
	d.c.mu.Unlock()
	return func() {
		d.c.mu.Lock()
		delete(d.onEvict, key)
		d.c.mu.Unlock()
	}
}

// evicted calls the OnEvict functions with shard; without Cache.mu.
func (d *Dataset) evicted(shard int) {
	d.c.mu.Lock()
	fns := make([]func(int), 0, len(d.onEvict))
	for fn := range d.onEvict {
		fns = append(fns, *fn)
	}
	d.c.mu.Unlock()
	for _, fn := range fns {
		fn(shard)
	}
}

// shardState is a shard's in-process state, guarded by Cache.mu.
type shardState struct {
	refs int      // leases held in this process
	f    *os.File // first raw file, flock'ed shared while refs > 0
	// idle is this process's idle hold on the shard (refs == 0), if any:
	// its first raw file, open and flock'ed shared (see idlehold.go).
	idle *idleHold
	// temp: f was opened under a fetch's temporary name (an early lease):
	// it is never held idle, as its lock and place are the fetch's to
	// give (or not, when the fetch fails).
	temp bool
	// fid is the FileID of fidOf, the last file the leases read through.
	fid     uint64
	fidOf   *os.File
	flight  *flight // fetch in progress in this process
	lastUse int64   // Cache.clock at the last lease
	// turnUse is Cache.clock at the last turn that moved a consumer to
	// the shard (Dataset.Touch; 0: none): the eviction order's last use
	// where it is set (see Touch).
	turnUse int64
	// early: the leases read the flight's complete temporary files (f is
	// one of them, not locked) while they are synced and renamed; the
	// flight hands f a shared lock once they are in place.
	early bool
	// mem is the shard's in-memory copy, if it has one (see memGet).
	mem *memShard
	// onDisk: this process saw the shard's files in the directory (the
	// registration's pass, a fetch's end, a lease) since it last found
	// them gone or evicted them. Another process may have fetched a
	// shard without it, or evicted one with it; it is a hint for evict.
	onDisk bool
}

// sawOnDisk records that shard's files are in the directory (onDisk).
// Call with c.mu held.
func (d *Dataset) sawOnDisk(shard int) { d.st[shard].onDisk = true }

// Add registers a dataset with the cache. It does not download anything,
// and it does not read the dataset's directory: the pass that reconciles
// the files already on disk with the shards (files whose size differs
// from the declared one are deleted, and so is a compressed file whose
// raw form is present unless KeepZip) and rebuilds the byte count runs
// behind the first leases, before anything else that needs the count or
// changes the directory (see Reconcile). Until then a shard is served
// only when its files have their declared sizes (checked as each shard is
// opened), so a restarted job's first batch over a full 40k-shard cache
// waits for no stat of the other shards' files.
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
		if d != nil && d.remote && c.behind.failed(d.manifestRel()) {
			// Its manifest's write failed, which holds its commits: try
			// again.
			if err := d.writeManifestBehind(ctx); err != nil {
				return nil, err
			}
		}
		return d, err
	}
	d := &Dataset{
		c: c, src: s, dir: dir,
		remote: s.Bucket != nil, st: make([]shardState, len(s.Shards)),
	}
	for i := range s.Shards {
		d.maxFoot = max(d.maxFoot, d.Footprint(i))
	}
	if err := os.MkdirAll(d.dir, d.c.opts.dirMode()); err != nil {
		return nil, fmt.Errorf("cache %s: %w", c.dir, err)
	}
	if d.remote {
		// The manifest is written now (in the background, ahead of every
		// commit of the dataset's shards), so that other processes can
		// evict the dataset's unleased shards from the start; the pass over
		// the files on disk is left for later (see settle). A restart
		// finds it in place and so takes no lock: a job whose shards
		// are cached starts even while another process holds the
		// directory lock.
		if !d.manifestCurrent() {
			// Written behind: the first shards' downloads need not wait
			// for its sync, their commits do.
			if err := d.writeManifestBehind(ctx); err != nil {
				return nil, err
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	for _, o := range c.datasets {
		if o.dir == d.dir { // added concurrently
			o.addChecks(&s)
			return o, nil
		}
	}
	c.datasets = append(c.datasets, d)
	if d.remote {
		c.pending = append(c.pending, d)
		if !c.settleSoon {
			c.settleSoon = true
			c.wg.Add(1)
			go c.settleLater()
		}
	} else {
		d.settled = true
	}
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
		d.addChecks(s)
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
func (d *Dataset) MaxFootprint() int64 { return d.maxFoot }

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
