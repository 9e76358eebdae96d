package stream

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicedata/sluice/cache"
	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/compress"
	"github.com/sluicedata/sluice/format/hashing"
	"github.com/sluicedata/sluice/plan"
)

// Dataset is an opened streaming dataset: its streams' indexes, its plan
// and its cache. It is safe for concurrent use.
type Dataset struct {
	opts     Options
	cache    *cache.Cache // nil when every stream is local-only
	ownCache bool
	streams  []*streamState
	shards   []shardRef // global shard ID → stream and entry
	planner  *plan.Planner
	table    *shardTable
	// idleShards counts the idle open shards of the root Dataset's tables
	// and its cursors' (see shardTable); only the root's is used.
	idleShards atomic.Int64
	// tables are the shard tables of the root and its open cursors, which
	// the cache's evictions reach (see shardTable); only the root's is
	// used. dropEvict removes the root's cache.Dataset.OnEvict functions.
	tablesMu  sync.Mutex
	tables    map[*shardTable]struct{}
	dropEvict []func()
	// indexBytes is the size of every stream's index.json in the cache.
	indexBytes int64

	// mu guards tracker and world.
	mu      sync.Mutex
	tracker *plan.Tracker
	world   *plan.World // the world of the last NewEpoch

	stats counters
	// tarIndex keeps the scanned layout of tar shards between opens.
	tarIndex tarIndexCache
	// bg counts Open's background work (recording the store's tags of a
	// downloaded index); Close waits for it.
	bg sync.WaitGroup
	// closing is cancelled (stopBG) when Close begins: the background
	// work then stops waiting for room in the cache.
	closing context.Context
	stopBG  context.CancelFunc
	// parent is the Dataset a Cursor shares its streams with (nil for
	// one Open returned): Close leaves them to it.
	parent *Dataset
	// group is the WorkerGroup its workers take turns in (nil: the
	// root's, made on first use; see workerGroup).
	group atomic.Pointer[WorkerGroup]
	// behind is the cache Open is opening for itself (see
	// openCacheBehind); nil once it is d.cache, or when Open opens none.
	behind *cacheBehind
}

// Open opens a dataset: it reads (downloading when missing) each stream's
// index.json, plans the epochs and registers the shards with the cache.
// It fails at once, with the minimum that would work, when the cache
// limit cannot hold the working set.
func Open(ctx context.Context, opts *Options) (_ *Dataset, err error) {
	if opts == nil {
		return nil, errors.New("stream: nil Options")
	}
	o := *opts
	streams, err := o.resolveStreams()
	if err != nil {
		return nil, err
	}
	d := &Dataset{opts: o}
	d.closing, d.stopBG = context.WithCancel(context.Background())
	defer func() {
		if err != nil {
			d.Close()
		}
	}()
	anyRemote := false
	for _, s := range streams {
		anyRemote = anyRemote || s.Remote != ""
	}
	if anyRemote {
		if o.Cache != nil {
			d.cache = o.Cache
		} else {
			root := o.Local
			if root == "" {
				root = defaultLocal(streams)
			}
			abs, err := filepath.Abs(root)
			if err != nil {
				return nil, fmt.Errorf("stream: cache %s: %w", root, err)
			}
			// Opened while the first stream's index is requested.
			d.openCacheBehind(ctx, abs, &cache.Options{Limit: o.CacheLimit, WaitTimeout: o.WaitTimeout, SharedGroup: o.CacheSharedGroup,
				Memory: o.cacheMemory()})
		}
	}
	var planStreams []plan.Stream
	for i, s := range streams {
		st, err := d.openStream(ctx, &o, s)
		if err != nil {
			if cerr := d.awaitCache(); cerr != nil {
				return nil, cerr // the cause (see cacheBehind.guard)
			}
			return nil, err
		}
		st.firstShar = len(d.shards)
		d.streams = append(d.streams, st)
		n := st.numShards()
		var sizes []int64
		if st.compact != nil {
			sizes = st.compact.SampleCounts()
		} else {
			sizes = make([]int64, n)
			for j := range sizes {
				sizes[j] = int64(st.index.Shards[j].Samples)
			}
		}
		d.shards = slices.Grow(d.shards, n)
		for j := range n {
			d.shards = append(d.shards, shardRef{stream: i, local: j})
		}
		planStreams = append(planStreams, plan.Stream{ShardSizes: sizes, Proportion: s.Proportion, Repeat: s.Repeat, Choose: s.Choose})
	}
	if err := d.awaitCache(); err != nil {
		return nil, err
	}
	d.planner, err = plan.New(planStreams, o.planOptions())
	if err != nil {
		return nil, fmt.Errorf("stream: %w", err)
	}
	d.opts.setShardSamples(d.planner.NumSamples(), len(d.shards))
	d.tracker = d.planner.NewTracker()
	d.table = newShardTable(d)
	d.tables = map[*shardTable]struct{}{d.table: {}}
	for _, st := range d.streams {
		if st.cds != nil {
			st := st
			d.dropEvict = append(d.dropEvict, st.cds.OnEvict(func(local int) { d.evicted(st.firstShar + local) }))
		}
	}
	// The working set: one leased shard per consumer of this dataset plus
	// one being fetched. Consumers are not known yet; require room for
	// one reader, the minimum any use needs. NewEpoch checks again with
	// its worker count.
	if err := d.checkLimit(1); err != nil {
		return nil, err
	}
	return d, nil
}

// CheckLimit fails with an error matching cache.ErrLimitTooSmall (a
// *cache.LimitError stating the minimum) when the cache limit cannot hold
// holders leased shards plus one being fetched, for the largest shard of
// any stream, besides the indexes. A server that lets each consumer hold
// several shards (the agent) passes their total.
func (d *Dataset) CheckLimit(holders int) error { return d.checkLimit(holders) }

// checkLimit fails when the cache cannot hold holders leased shards plus
// one being fetched, for the largest shard of any stream.
func (d *Dataset) checkLimit(holders int) error {
	var worst *cache.Dataset
	for _, st := range d.streams {
		if st.cds != nil && (worst == nil || st.cds.MaxFootprint() > worst.MaxFootprint()) {
			worst = st.cds
		}
	}
	if worst == nil {
		return nil
	}
	if err := worst.CheckLimit(holders, d.indexBytes); err != nil {
		return fmt.Errorf("stream: %w", err)
	}
	return nil
}

// resolveStreams returns the streams with dataset defaults filled in.
func (o *Options) resolveStreams() ([]Stream, error) {
	if len(o.Streams) > 0 {
		if o.Remote != "" {
			return nil, errors.New("stream: give Streams or Remote, not both")
		}
		return o.Streams, nil
	}
	if o.Remote == "" && o.Local == "" {
		return nil, errors.New("stream: Remote or Local is required")
	}
	s := Stream{Remote: o.Remote, Split: o.Split}
	if o.Remote == "" || sameDir(o.Remote, o.Local) {
		// A local dataset: read in place, never fetched or evicted.
		s.Remote, s.Local = "", o.Local
	}
	return []Stream{s}, nil
}

func sameDir(remote, local string) bool {
	if strings.Contains(remote, "://") && !strings.HasPrefix(remote, "file://") {
		return false
	}
	a, err1 := filepath.Abs(strings.TrimPrefix(remote, "file://"))
	b, err2 := filepath.Abs(local)
	return err1 == nil && err2 == nil && a == b
}

// dirName derives a stream's directory name from its remote and split.
func dirName(remote, split string) string {
	h := sha256.Sum256([]byte(remote + "\x00" + split))
	return "ds-" + hex.EncodeToString(h[:8])
}

func defaultLocal(streams []Stream) string {
	var b strings.Builder
	for _, s := range streams {
		b.WriteString(s.Remote)
		b.WriteByte(0)
	}
	return filepath.Join(os.TempDir(), "sluice", dirName(b.String(), ""))
}

// openStream reads one stream's index and registers it with the cache.
func (d *Dataset) openStream(ctx context.Context, o *Options, s Stream) (*streamState, error) {
	st := &streamState{remote: s.Remote, keepZip: o.KeepZip, validate: o.ValidateHash}
	if s.KeepZip != nil {
		st.keepZip = *s.KeepZip
	}
	if s.ValidateHash != nil {
		st.validate = *s.ValidateHash
	}
	if st.validate != "" && !hashing.Valid(st.validate) {
		return nil, fmt.Errorf("stream: validate_hash: %w: unknown algorithm %q", plan.ErrInvalid, st.validate)
	}
	if s.Remote == "" {
		dir := s.Local
		if dir == "" {
			return nil, errors.New("stream: a stream needs Remote or Local")
		}
		if !filepath.IsAbs(dir) && len(o.Streams) > 0 && o.Local != "" {
			dir = filepath.Join(o.Local, dir)
		}
		st.dir = filepath.Join(dir, filepath.FromSlash(s.Split))
		if idx, root, err := localTarIndex(ctx, dir, st.dir); idx != nil || err != nil {
			// WebDataset tars read in place.
			if err != nil {
				return nil, err
			}
			st.dir, st.index = root, idx
			return st, nil
		}
		name := filepath.Join(st.dir, format.IndexFile)
		c, _, err := readIndexFile(name)
		if err != nil {
			return nil, err
		}
		st.setCompact(c)
		if err := checkRatios(name, st, o.MaxCompressionRatio); err != nil {
			return nil, err
		}
		return st, nil
	}

	// A remote stream: its directory lives in the cache.
	rel, err := d.streamRel(o, s)
	if err != nil {
		return nil, err
	}
	if o.Registry == nil {
		return nil, fmt.Errorf("stream: opening %q needs a storage Registry", s.Remote)
	}
	root := s.Remote
	if s.Split != "" {
		root = strings.TrimSuffix(root, "/") + "/" + s.Split
	}
	if root, st.tar, err = tarStreamRoot(root); err != nil {
		return nil, err
	}
	timeout := o.DownloadTimeout
	if s.DownloadTimeout != nil {
		timeout = *s.DownloadTimeout
	}
	b, err := openStore(ctx, o, root, timeout)
	if err != nil {
		return nil, err
	}
	st.bucket = b
	st.dir = filepath.Join(d.cacheRoot(), filepath.FromSlash(rel))
	n, cacheIndex, err := d.loadIndex(ctx, st, rel)
	if err != nil {
		return nil, err
	}
	if err := checkRatios(b.URL(format.IndexFile), st, o.MaxCompressionRatio); err != nil {
		return nil, err
	}
	d.indexBytes += n

	retry := o.DownloadRetry
	if s.DownloadRetry != nil {
		retry = *s.DownloadRetry
	}
	if retry < 0 {
		return nil, fmt.Errorf("stream: %w: download_retry %d must be ≥ 0", plan.ErrInvalid, retry)
	}
	if retry == 0 && o.DownloadRetry == 0 && s.DownloadRetry == nil {
		retry = 2
	}
	if retry == 0 {
		return nil, errors.New("stream: download_retry 0 makes every download fail (it counts attempts, not retries)")
	}
	src := &cache.Source{
		Dir: rel, Bucket: b, KeepZip: st.keepZip, Attempts: retry, AttemptTimeout: timeout, VerifyKey: st.validate,
		Decompress: func(comp string, dst io.Writer, r io.Reader, raw int64) error {
			_, err := compress.DecompressStream(dst, r, familyOf(comp), raw)
			return err
		},
		// An MDS shard's reader takes its bytes from memory when the
		// lease has them (see openShard).
		InMemory: func(j int) bool {
			info := st.info(j)
			return info.Format == "mds" && info.RawMeta == nil
		},
	}
	src.Shards = st.cacheShards()
	if err := d.awaitCache(); err != nil {
		return nil, err
	}
	st.cds, err = d.cache.Add(ctx, src)
	if err != nil {
		return nil, fmt.Errorf("stream: %w", err)
	}
	if cacheIndex != nil {
		if err := cacheIndex(); err != nil {
			return nil, err
		}
	}
	return st, nil
}

func familyOf(comp string) string {
	f, _, _ := strings.Cut(comp, ":")
	return f
}

// streamRel returns a remote stream's directory relative to the cache root.
func (d *Dataset) streamRel(o *Options, s Stream) (string, error) {
	local := s.Local
	if len(o.Streams) == 0 {
		// A single dataset: without a shared cache, Local is the root.
		local = ""
		if o.Cache != nil {
			local = o.Local
		}
	}
	rel := ""
	switch {
	case local == "" && (len(o.Streams) > 0 || o.Cache != nil):
		rel = dirName(s.Remote, "")
	case local == "":
	case filepath.IsAbs(local):
		r, err := filepath.Rel(d.cacheRoot(), local)
		if err != nil || !filepath.IsLocal(r) {
			return "", fmt.Errorf("stream: local directory %s is outside the cache root %s", local, d.cacheRoot())
		}
		rel = r
	default:
		if !filepath.IsLocal(local) {
			return "", fmt.Errorf("stream: local directory %q leaves the cache root", local)
		}
		rel = local
	}
	if s.Split != "" {
		rel = filepath.Join(rel, filepath.FromSlash(s.Split))
	}
	return filepath.ToSlash(rel), nil
}

// Close releases the dataset's buckets and, unless it was shared, its
// cache. Iterators must be closed first.
func (d *Dataset) Close() error {
	if d.stopBG != nil {
		d.stopBG()
	}
	_ = d.awaitCache() // an Open that failed while its cache was opening: closed below
	d.bg.Wait()
	if d.table != nil { // nil when Open failed early
		r := d.root()
		r.tablesMu.Lock()
		delete(r.tables, d.table)
		r.tablesMu.Unlock()
		d.table.closeIdle()
	}
	if d.parent == nil {
		for _, drop := range d.dropEvict {
			drop()
		}
	}
	if d.parent != nil {
		return nil // the streams and the cache are the parent's
	}
	var errs []error
	for _, st := range d.streams {
		if st.bucket != nil {
			errs = append(errs, st.bucket.Close())
		}
	}
	if d.ownCache && d.cache != nil {
		errs = append(errs, d.cache.Close())
	}
	return errors.Join(errs...)
}

// Len returns the number of samples addressable by Get (MosaicML's
// num_samples): every stream's samples, streams concatenated.
func (d *Dataset) Len() int64 { return d.planner.NumSamples() }

// EpochSize returns the number of samples per epoch over all ranks.
func (d *Dataset) EpochSize() int64 { return d.planner.EpochSize() }

// RankLen returns MosaicML's len(dataset) for w: ceil(epoch_size / ranks)
// in the parallel world.
func (d *Dataset) RankLen(w plan.World) (int64, error) {
	p, err := w.Parallel()
	if err != nil {
		return 0, fmt.Errorf("stream: %w", err)
	}
	return d.planner.Len(p.NumRanks()), nil
}

// NumShards returns the number of shards of all streams.
func (d *Dataset) NumShards() int { return len(d.shards) }

// Planner returns the dataset's epoch planner.
func (d *Dataset) Planner() *plan.Planner { return d.planner }

// Cache returns the dataset's cache; nil when every stream is local.
func (d *Dataset) Cache() *cache.Cache { return d.cache }

// ShardSamples returns the number of samples of a global shard.
func (d *Dataset) ShardSamples(shard int) int64 {
	ref := d.shards[shard]
	st := d.streams[ref.stream]
	if st.compact != nil {
		return int64(st.compact.ShardSamples(ref.local))
	}
	return int64(st.index.Shards[ref.local].Samples)
}

// ShardBytes returns the size of a global shard's raw data file.
func (d *Dataset) ShardBytes(shard int) int64 {
	ref := d.shards[shard]
	_, n, _ := d.streams[ref.stream].file(ref.local, format.RawData)
	return n
}

// ShardConfig returns a number for a global shard's writer configuration
// (the fields of its ShardInfo but Samples and the files): shards with
// the same number have equal such fields. Numbers are in [0, NumShards);
// ConfigInfo describes them. It reads no more than the compact index (a
// server describing 40k shards makes no ShardInfo for them).
func (d *Dataset) ShardConfig(shard int) int {
	ref := d.shards[shard]
	st := d.streams[ref.stream]
	if st.compact != nil {
		return st.firstShar + st.compact.Config(ref.local)
	}
	return shard // one per shard
}

// ConfigInfo returns a ShardInfo with configuration k (see ShardConfig);
// only its configuration fields are meaningful. It is shared: read-only.
func (d *Dataset) ConfigInfo(k int) *format.ShardInfo {
	for _, st := range d.streams {
		if k >= st.firstShar && k < st.firstShar+st.numShards() {
			if st.compact != nil {
				return st.compact.ConfigInfo(k - st.firstShar)
			}
			return &st.index.Shards[k-st.firstShar]
		}
	}
	return nil
}

// ShardInfo returns the index entry of a global shard.
func (d *Dataset) ShardInfo(shard int) *format.ShardInfo {
	ref := d.shards[shard]
	return d.streams[ref.stream].info(ref.local)
}

// Get returns the decoded sample with global ID i (negative i counts from
// the end), fetching its shard if needed.
func (d *Dataset) Get(ctx context.Context, i int64) (format.Sample, error) {
	var s format.Sample
	err := d.with(ctx, i, func(os *openShard, j int) (err error) {
		s, err = os.sample(j)
		return err
	})
	return s, err
}

// Record appends the raw record bytes of sample i to dst.
func (d *Dataset) Record(ctx context.Context, i int64, dst []byte) ([]byte, error) {
	err := d.with(ctx, i, func(os *openShard, j int) error {
		rec, err := os.r.Record(j)
		dst = append(dst, rec...)
		return err
	})
	return dst, err
}

func (d *Dataset) with(ctx context.Context, i int64, fn func(*openShard, int) error) error {
	n := d.Len()
	if i < 0 {
		i += n
	}
	shard, j, err := d.planner.Locate(i)
	if err != nil {
		return fmt.Errorf("stream: sample %d: %w", i, err)
	}
	start := time.Now()
	os, hit, err := d.table.acquire(ctx, shard, false)
	d.stats.wait.Add(int64(time.Since(start)))
	if err != nil {
		return err
	}
	defer d.table.release(os)
	d.stats.hit(hit)
	if err := fn(os, int(j)); err != nil {
		return err
	}
	d.stats.samples.Add(1)
	return nil
}

// Load registers a resume state (MosaicML's load_state_dict); the next
// NewEpoch continues from it, on any world shape.
func (d *Dataset) Load(s plan.State) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.tracker.Load(s); err != nil {
		return fmt.Errorf("stream: %w", err)
	}
	return nil
}

// Continue registers a state that continues an epoch this Dataset may
// already have begun (plan.Tracker.Continue): the next NewEpoch plays the
// state's epoch from its sample_in_epoch even if that epoch began before.
func (d *Dataset) Continue(s plan.State) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.tracker.Continue(s); err != nil {
		return fmt.Errorf("stream: %w", err)
	}
	return nil
}

// NextEpoch returns the epoch the next NewEpoch presumes (MosaicML's
// next_epoch; plan.Tracker.NextEpoch).
func (d *Dataset) NextEpoch() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.tracker.NextEpoch()
}

// PresumeEpoch sets the epoch the next NewEpoch presumes
// (plan.Tracker.Presume): a server playing each DataLoader worker on a
// cursor of its own aligns a worker with its rank's epoch with it.
func (d *Dataset) PresumeEpoch(epoch int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.tracker.Presume(epoch)
}

// State returns the state dict to save after this rank has yielded
// samplesYielded samples of the current epoch (MosaicML's
// StreamingDataLoader.state_dict; every rank is assumed to be as far).
func (d *Dataset) State(samplesYielded int64) (plan.State, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	w := plan.World{Nodes: 1, RanksPerNode: 1}
	if d.world != nil {
		w = *d.world
	}
	s, err := d.tracker.State(w, samplesYielded)
	if err != nil {
		return plan.State{}, fmt.Errorf("stream: %w", err)
	}
	return s, nil
}

// indexWriteErr waits for the writes of the indexes this Open downloaded
// (WriteFileBehind) and returns the first failure, naming the stream. A
// failed write fails every shard commit under the stream's directory, but
// an epoch read wholly from early (uncommitted) shard files would not see
// that: the iterator reports it at the end of the epoch instead, so an
// epoch never ends silently with nothing cached.
func (d *Dataset) indexWriteErr() error {
	for _, st := range d.streams {
		if st.indexWritten == nil {
			continue
		}
		if err := st.indexWritten(); err != nil {
			return fmt.Errorf("stream: %s: caching its %s: %w", st.remote, format.IndexFile, err)
		}
	}
	return nil
}

// cacheErr is what an epoch that read every sample still ends with: the
// failed write of a stream's index into the cache (see indexWritten), or
// a failed pass of the cache's registration over the stream's files
// already on disk (cache.Dataset.Reconcile: a file it could not read or
// delete), which runs behind the first reads and would otherwise go
// unreported.
func (d *Dataset) cacheErr(ctx context.Context) error {
	if err := d.indexWriteErr(); err != nil {
		return err
	}
	for _, st := range d.streams {
		if st.cds == nil {
			continue
		}
		if err := st.cds.Reconcile(ctx); err != nil {
			return fmt.Errorf("stream: %s: checking its cached files: %w", st.remote, err)
		}
	}
	return nil
}
