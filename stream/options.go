package stream

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/sluicedata/sluice/cache"
	"github.com/sluicedata/sluice/plan"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/retry"
	"github.com/sluicedata/sluice/stream/prefetch"
)

// Options are MosaicML StreamingDataset's constructor arguments under the
// same names and with the same defaults (spec §15.1), plus what Go needs
// to wire them. A nil *Options is invalid (Remote or Local is required).
type Options struct {
	// Remote is the dataset root URL or path (remote); empty means the
	// dataset is in Local alone. Give Remote/Local or Streams, not both.
	Remote string
	// Local is the local cache directory (local). With Streams it is the
	// cache root under which each stream gets a directory. Empty: a
	// directory under the system temp dir derived from Remote.
	Local string
	// Split is a subdirectory under Remote and Local (split).
	Split string
	// Streams mixes several datasets (streams).
	Streams []Stream

	// Registry opens remote URLs. Nil: plain paths only (file scheme).
	Registry *storage.Registry
	// Cache is a cache shared with other datasets in this process (the
	// agent's). Nil: Open opens one rooted at Local with CacheLimit and
	// closes it with the Dataset. With a shared cache, each stream's
	// directory is Local (or Stream.Local) relative to the cache root,
	// or a name derived from its remote when empty.
	Cache *cache.Cache

	// DownloadRetry is the total number of download attempts per file
	// (download_retry). Zero means 2.
	DownloadRetry int
	// DownloadTimeout bounds one download attempt (download_timeout).
	// Zero means 60 s.
	DownloadTimeout time.Duration
	// ValidateHash names a hash algorithm checked on every downloaded
	// file (validate_hash); empty means none.
	ValidateHash string
	// KeepZip keeps compressed shard files after decompression (keep_zip).
	KeepZip bool
	// EpochSize is the number of samples per epoch (epoch_size; 0: the sum
	// of the streams' counts). ParseEpochSize reads "100k" strings.
	EpochSize int64
	// Predownload is how many samples ahead of its consumer an Iterator
	// fetches (predownload). Zero means 8·BatchSize (64 without one), as
	// in MosaicML, or, when more, 2·PrefetchConcurrency shards of the
	// average size: room to keep PrefetchConcurrency downloading while
	// the consumer waits for the nearest one. A window smaller than that
	// leaves a fast store idle (16 MB shards of 100 KB samples and
	// batches of 32: 256 samples are 1.6 shards; a window of exactly
	// PrefetchConcurrency shards idles the slots of the fetches behind a
	// late one).
	Predownload int
	// CacheLimit is the most bytes the cache directory may hold
	// (cache_limit). Zero: no limit. ParseBytes reads "100gb" strings.
	// Ignored when Cache is set (the shared cache has its own limit).
	CacheLimit int64
	// OrderAdmissions makes the DataLoader workers of a rank (Epoch.Iter
	// of an epoch with several workers) take their shard changes in turn
	// under a cache limit, sample by sample, each worker a step behind the
	// one before (see WorkerGroup): what the cache evicts and downloads again is
	// then the same on every run, and `sluice simulate --order-admissions`
	// predicts it exactly. A worker's prefetch walk then runs in its
	// turns alone (not when a fetch frees a slot), and it has no
	// first-sample budget; its first turn waits for its whole plan (a
	// resumed worker's first sample, for the mapping of the IDs after its
	// first batch). It costs throughput where the workers fetch on
	// demand (a limit that leaves no prefetch budget): a worker's next
	// fetch waits for the worker before it in the order to reach its
	// shard change, which waits for that worker's download (with 2 MB
	// shards and the default predownload, sim's BenchmarkTurnsCostS3 at
	// a light load: 1.1-1.4x the wall time with 2-4 workers and ~1.6x
	// with 8 where shards are fetched again, 1.0-1.2x where each is
	// fetched once; docs/input-bound.md). False (the default): every
	// worker goes at once.
	OrderAdmissions bool
	// SamplingMethod is balanced or fixed (sampling_method; "" = balanced).
	SamplingMethod string
	// SamplingGranularity is the pick size for partial repeats
	// (sampling_granularity; 0 means 1).
	SamplingGranularity int64
	// PartitionAlgo is orig or relaxed (partition_algo; "" = relaxed).
	PartitionAlgo string
	// NumCanonicalNodes fixes the global order (num_canonical_nodes; 0:
	// resolved at the first epoch as MosaicML does).
	NumCanonicalNodes int
	// BatchSize is the per-device batch size (batch_size), required
	// before iterating.
	BatchSize int
	// Shuffle enables shuffling (shuffle).
	Shuffle bool
	// ShuffleAlgo is naive, py1s, py2s, py1br or py1e (shuffle_algo;
	// "" = py1e).
	ShuffleAlgo string
	// ShuffleSeed is the seed (shuffle_seed; nil = 9176).
	ShuffleSeed *int64
	// ShuffleBlockSize is used by py1br and py1e (shuffle_block_size; 0:
	// max(4_000_000/NCN, 1<<18)).
	ShuffleBlockSize int64
	// BatchingMethod is random, stratified, per_stream or
	// device_per_stream (batching_method; "" = random).
	BatchingMethod string
	// AllowUnsafeTypes permits pkl columns (allow_unsafe_types). Sluice
	// never unpickles; without it, decoding a pkl column is an error, as
	// in MosaicML.
	AllowUnsafeTypes bool
	// Replication is the number of consecutive ranks that see identical
	// data (replication; 0 or 1: none).
	Replication int

	// PrefetchConcurrency bounds the shard downloads one Iterator runs at
	// once (a shard counts until its bytes are written; its sync and
	// rename run on without a slot). Zero means 8.
	PrefetchConcurrency int
	// Retry is the retry policy of every store the dataset reads (index
	// and shards), under which each stream's store is opened through the
	// standard decorators (storage/stack). Nil means retry's defaults: 10
	// consecutive failed attempts per request, backoff from 100ms doubling
	// to 20s with jitter, at least 1s after throttling (503 SlowDown, 429),
	// Retry-After honoured up to 2m, a 30s stall timeout after which a body
	// resumes from the byte it reached. Its AttemptTimeout, when zero, is
	// the stream's DownloadTimeout.
	Retry *retry.Options
	// MaxCompressionRatio caps the raw size a compressed shard may claim:
	// at most this many times its compressed size (plus 1 MiB). Zero
	// means compress.DefaultMaxRatio (1024). A larger claim fails at Open,
	// naming the shard; decompression writes to disk as it goes and stops
	// at the claimed size, so no claim makes it hold more memory.
	MaxCompressionRatio int64
	// MaxIndexBytes is the most bytes of a remote index.json Open reads;
	// a larger (or endless) one fails with ErrIndexTooLarge. Zero means
	// DefaultMaxIndexBytes (256 MiB).
	MaxIndexBytes int64
	// MaxInFlight bounds the requests in flight to each stream's store.
	// Zero means 64; negative means no bound.
	MaxInFlight int
	// StoreInner, when set, wraps each stream's store under the retry
	// decorators (storage/stack Options.Inner), so that what it adds, the
	// timing of metrics.Store.Bucket say, sees every attempt of a
	// retried request.
	StoreInner func(storage.Bucket) storage.Bucket

	// CacheSharedGroup makes the cache Open creates usable by the group
	// of its directory (0770 directories with set-group-ID, 0660 files)
	// instead of its owner alone (0700/0600). Ignored when Cache is set.
	CacheSharedGroup bool

	// CacheMemory is how many bytes of memory the cache Open creates may
	// hold MDS shards in as it fetches them (cache.Options.Memory): read
	// from there by this process's iterators and written to disk with
	// direct I/O, bypassing the page cache. Zero means
	// DefaultCacheMemory; negative means none (every shard is read from
	// its file). After the Dataset's Close, the cache's free memory
	// (at most CacheMemory) waits a minute for the next cache of the
	// process. Ignored when Cache is set.
	CacheMemory int64

	// WaitTimeout bounds every wait for a shard (space, another process's
	// download). Zero means 10 minutes. Ignored when Cache is set.
	WaitTimeout time.Duration

	// shardSamples is the average number of samples per shard of the
	// opened dataset (set by Open on its copy; 0 before), for the default
	// prefetch window.
	shardSamples int64
}

// defaultPrefetchConcurrency is the prefetcher's concurrency when
// Options.PrefetchConcurrency is zero.
const defaultPrefetchConcurrency = 8

// DefaultCacheMemory is the default of Options.CacheMemory: the shards
// in flight of the default prefetch (8) and as many fetched ahead, at
// 16 MiB each. A block is reused as soon as its shard is read, so the
// limit bounds the peak, not what a pass allocates: BenchmarkColdS3's
// passes (128 MB in 4 or 16 MB shards) held at most 50-97 MB and
// 125 MB, and never reached it; at 64 MiB 5-8 of the 32 shards of 4 MB
// and 4 of the 8 of 16 MB went through their files instead (more CPU
// per MB), with no fewer fresh blocks.
const DefaultCacheMemory = 256 << 20

// cacheMemory is CacheMemory with its default.
func (o *Options) cacheMemory() int64 {
	switch {
	case o.CacheMemory < 0:
		return 0
	case o.CacheMemory == 0:
		return DefaultCacheMemory
	}
	return o.CacheMemory
}

// setShardSamples records the average shard of a dataset of samples in
// shards, for the default prefetch window.
func (o *Options) setShardSamples(samples int64, shards int) {
	if shards > 0 && samples > 0 {
		o.shardSamples = (samples + int64(shards) - 1) / int64(shards)
	}
}

// Stream is one dataset of a mix (MosaicML's Stream, spec §15.2). Unset
// per-stream fields take the Options' values.
type Stream struct {
	// Remote is the stream's root URL or path; empty: local only.
	Remote string
	// Local is the stream's directory: relative to Options.Local (the
	// cache root), or absolute inside it. Empty: derived from Remote.
	Local string
	// Split is a subdirectory under Remote and Local.
	Split string
	// Proportion is the relative weight (proportion).
	Proportion *float64
	// Repeat multiplies the stream's sample count (repeat).
	Repeat *float64
	// Choose is the absolute number of samples per epoch (choose).
	Choose *int64
	// DownloadRetry overrides Options.DownloadRetry when non-nil.
	DownloadRetry *int
	// DownloadTimeout overrides Options.DownloadTimeout when non-nil.
	DownloadTimeout *time.Duration
	// ValidateHash overrides Options.ValidateHash when non-nil.
	ValidateHash *string
	// KeepZip overrides Options.KeepZip when non-nil.
	KeepZip *bool
}

func (o *Options) planOptions() *plan.Options {
	return &plan.Options{
		Shuffle: o.Shuffle, ShuffleAlgo: o.ShuffleAlgo, ShuffleSeed: o.ShuffleSeed,
		ShuffleBlockSize: o.ShuffleBlockSize, NumCanonicalNodes: o.NumCanonicalNodes,
		BatchSize: o.BatchSize, PartitionAlgo: o.PartitionAlgo, SamplingMethod: o.SamplingMethod,
		SamplingGranularity: o.SamplingGranularity, BatchingMethod: o.BatchingMethod,
		EpochSize: o.EpochSize,
	}
}

func (o *Options) predownload() int {
	if o.Predownload > 0 {
		return o.Predownload
	}
	return prefetch.DefaultWindow(o.BatchSize, o.PrefetchConcurrency, o.shardSamples)
}

// ParseBytes parses a byte count as MosaicML does for cache_limit and
// size_limit: an integer, or a number with a unit b, kb, mb, gb, tb, pb,
// eb (powers of 1024, case-insensitive), fractions allowed ("1.5kb" =
// 1536). The IEC spellings kib, mib, gib, tib, pib and eib ("10GiB") are
// the same powers of 1024 (MosaicML refuses them).
func ParseBytes(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	if t == "" {
		return 0, fmt.Errorf("stream: empty byte count")
	}
	mult := 1.0
	for i, p := range []string{"k", "m", "g", "t", "p", "e"} {
		if u, ok := cutUnit(t, p); ok {
			mult = math.Pow(1024, float64(i+1))
			t = u
			break
		}
	}
	if mult == 1 {
		t = strings.TrimSuffix(t, "b")
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(t), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0, fmt.Errorf("stream: bad byte count %q (want a number of bytes, or one with a unit: b, kb, mb, gb, tb, pb, eb, powers of 1024; or kib ... eib alike)", s)
	}
	n := v * mult
	if n >= math.MaxInt64 {
		return 0, fmt.Errorf("stream: byte count %q too large", s)
	}
	return int64(n), nil
}

// cutUnit returns t without its unit when t ends with prefix p followed
// by "b" or "ib" (MosaicML's "gb" or IEC's "gib").
func cutUnit(t, p string) (string, bool) {
	for _, u := range []string{p + "ib", p + "b"} {
		if strings.HasSuffix(t, u) {
			return strings.TrimSuffix(t, u), true
		}
	}
	return "", false
}

// ParseEpochSize parses MosaicML's epoch_size ("100k", "1.5m", "77b").
func ParseEpochSize(s string) (int64, error) { return plan.ParseEpochSize(s) }
