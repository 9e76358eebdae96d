package sim

import (
	"errors"
	"fmt"
	"time"

	"github.com/sluicedata/sluice/cache"
	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/plan"
	"github.com/sluicedata/sluice/stream/prefetch"
)

// ErrInvalid marks every error caused by an invalid configuration. Check
// it with errors.Is.
var ErrInvalid = errors.New("sim: invalid configuration")

// Shard is one shard as the simulator sees it.
type Shard struct {
	// Samples is the shard's sample count.
	Samples int64
	// StoredBytes is what a download transfers: the compressed files when
	// the shard is stored compressed, else the raw ones.
	StoredBytes int64
	// CachedBytes is what the shard occupies in the cache once present:
	// its raw files, plus the compressed ones with KeepZip.
	CachedBytes int64
	// Footprint is what the cache reserves while the shard is fetched:
	// raw plus compressed bytes (cache.Dataset.Footprint).
	Footprint int64
	// Files is the number of files one download fetches (1 for MDS, 2
	// for JSON lines and CSV).
	Files int
	// Requests is the number of store requests one download makes: a GET
	// per file, or for a file large enough to be fetched in parallel
	// ranges, a GET per range and the Stat their checksum comes from
	// (cache.Requests). Zero means Files.
	Requests int
}

// requests returns the store requests of one download of sh.
func (sh *Shard) requests() int64 {
	if sh.Requests > 0 {
		return int64(sh.Requests)
	}
	return int64(sh.Files)
}

// Dataset is the simulated dataset: its shards in index order, and the
// size of its index.json (fetched once per node and kept in the cache).
type Dataset struct {
	Shards     []Shard
	IndexBytes int64
	// OpenBytes is what opening the dataset downloads when that is not
	// its index (0: IndexBytes): a tar dataset without an index reads
	// its shards' headers (small-member tars whole) and caches the index
	// it builds, IndexBytes.
	OpenBytes int64
	// IndexStampBytes is the size of what stream stores beside the
	// cached index.json once it is written: the store's ETag of it
	// (index.json.etag; 34 bytes on S3, none for a tar dataset or a store
	// without ETags). It counts against the cache limit from the start,
	// as the real stamp does from its write (a background write right
	// after the index's, before the first shard is in), but not in the
	// prefetch budget, which stream computes from the index alone. With
	// several streams, every stream's.
	IndexStampBytes int64
}

// openBytes is what opening d downloads.
func (d *Dataset) openBytes() int64 {
	if d.OpenBytes > 0 {
		return d.OpenBytes
	}
	return d.IndexBytes
}

// DatasetFromIndex describes a parsed index.json of indexBytes bytes.
// With keepZip a compressed shard keeps its compressed files in the cache.
func DatasetFromIndex(idx *format.Index, indexBytes int64, keepZip bool) Dataset {
	d := Dataset{Shards: make([]Shard, len(idx.Shards)), IndexBytes: indexBytes}
	for i := range idx.Shards {
		si := &idx.Shards[i]
		sh := Shard{Samples: int64(si.Samples)}
		raws := []*format.FileInfo{&si.RawData}
		zips := []*format.FileInfo{si.ZipData}
		if si.RawMeta != nil || si.ZipMeta != nil {
			raws = append(raws, si.RawMeta)
			zips = append(zips, si.ZipMeta)
		}
		for k := range raws {
			var raw, zip int64
			if raws[k] != nil {
				raw = raws[k].Bytes
			}
			sh.Files++
			if zips[k] != nil {
				zip = zips[k].Bytes
				sh.Requests += cache.Requests(zip)
				sh.StoredBytes += zip
				sh.Footprint += raw + zip
				sh.CachedBytes += raw
				if keepZip {
					sh.CachedBytes += zip
				}
			} else {
				sh.Requests += cache.Requests(raw)
				sh.StoredBytes += raw
				sh.Footprint += raw
				sh.CachedBytes += raw
			}
		}
		d.Shards[i] = sh
	}
	return d
}

// UniformDataset describes shards of the given sample counts, each of
// bytesPerSample bytes per sample, uncompressed, one file per shard.
func UniformDataset(sizes []int64, bytesPerSample int64, indexBytes int64) Dataset {
	d := Dataset{Shards: make([]Shard, len(sizes)), IndexBytes: indexBytes}
	for i, n := range sizes {
		b := n * bytesPerSample
		d.Shards[i] = Shard{Samples: n, StoredBytes: b, CachedBytes: b, Footprint: b, Files: 1, Requests: cache.Requests(b)}
	}
	return d
}

// Store models the object store as every node sees it: each request waits
// Latency before its first byte, then its bytes go through the node's link
// one request after another (a FIFO link: the same total throughput as
// fair sharing, whole shards completing in request order).
type Store struct {
	// Latency is the time from a request to its first byte.
	Latency time.Duration
	// BandwidthPerNode is one node's download rate in bytes/s (0: no
	// limit).
	BandwidthPerNode float64
	// BandwidthTotal is the store's rate for all nodes together in
	// bytes/s (0: no limit); each node gets an equal share.
	BandwidthTotal float64
}

// Config is one simulated run.
type Config struct {
	// Dataset is what is read.
	Dataset Dataset
	// Plan holds the order options (shuffle, batch size, ...): the same
	// plan.Options `sluice stream` and the agent pass to the planner.
	Plan plan.Options
	// Shape is the world: nodes, ranks per node, DataLoader workers per
	// rank.
	Shape plan.Shape
	// Epochs is the number of epochs to play (0 means 1). The cache is
	// kept from one epoch to the next.
	Epochs int
	// Predownload is the prefetch window of one consumer in samples (0:
	// stream.Options' default, prefetch.DefaultWindow).
	Predownload int
	// CacheLimit is each node's cache limit in bytes (0: none).
	CacheLimit int64
	// PrefetchConcurrency bounds one consumer's concurrent prefetches (0:
	// 8, as stream.Options).
	PrefetchConcurrency int
	// RankIterator models `sluice stream`: one iterator (and prefetcher)
	// per rank over the rank's batches. False models the agent and the
	// Python client: one iterator per DataLoader worker.
	RankIterator bool
	// PrefetchFactor is how many batches a DataLoader worker may have
	// requested ahead of the training loop (torch's prefetch_factor; 0:
	// 2, its default): the loop asks worker s mod W for batch s when it
	// takes batch s − PrefetchFactor × W (the first PrefetchFactor × W
	// at the start), and a worker reads its batches one after another.
	// With RankIterator there are no workers and no read-ahead.
	PrefetchFactor int
	// OrderAdmissions models stream.Options' OrderAdmissions: under a
	// cache limit the DataLoader workers of a rank take their shard
	// changes in turn, sample by sample, each worker a step behind the
	// one before (see stream.WorkerGroup). Unused with RankIterator or one
	// worker.
	OrderAdmissions bool
	// WorkerStart is the time from the training loop's start (iter over
	// the DataLoader) until each DataLoader worker can send its first
	// request, every epoch: the Python client's worker process start and
	// its handshake with the agent (`sluice simulate --worker-start`,
	// 40 ms by default there: 30-45 ms measured at load ~4 by
	// python/tests/test_sim_validate.py, up to ~170 ms on a loaded
	// machine). Unused with RankIterator.
	WorkerStart time.Duration
	// Store is the store model.
	Store Store
	// DecodeCost is the CPU time a DataLoader worker spends per sample.
	DecodeCost time.Duration
	// StepTime gives each training step's compute time (nil: 0).
	StepTime StepTime
	// Nodes restricts the simulation to these nodes (nil: all). Steps
	// still synchronise over the simulated nodes only.
	Nodes []int
	// IndexRequests is the number of store requests opening the dataset
	// makes (0: 1, as stream.Open on a fresh cache over S3, Azure, HTTP
	// and files: a GET of index.json, whose response tells what a Stat
	// would; GCS, whose reads do not say, adds a Stat: 2; a tar dataset
	// without an index adds the scan of its shards' headers). sluice
	// simulate counts them as it reads the index.
	IndexRequests int
	// Streams splits Dataset.Shards, in order, into the streams of a
	// mixed dataset (stream.Options.Streams, MosaicML's streams): each
	// its number of shards and its weights. Nil means one stream of every
	// shard. With several, Dataset.IndexBytes and IndexRequests are every
	// stream's index together.
	Streams []Stream
	// KeepSteps records every step's wait in the report (memory: 8 bytes
	// per step and node).
	KeepSteps bool

	// onEvict, when set (tests), is called before each eviction with the
	// node and the victim.
	onEvict func(nd *node, victim int)
	// onPrefetch, when set (tests), is called before each prefetch with
	// the node, the consumer, the position in its order and the shard.
	onPrefetch func(nd *node, consumer int, at int64, shard int)
	// stepGroups, when set (tests), is the number of goroutines playing
	// the nodes' steps (0: GOMAXPROCS, at most one per two nodes).
	stepGroups int
	// shardsInOrder, when set (tests), numbers every node's shards as
	// the dataset does (node.local) instead of in the order it meets them.
	shardsInOrder bool
}

// Stream is one stream of a mixed dataset (see Config.Streams): how many
// of Dataset.Shards, in order, are its, and MosaicML's weights, as
// plan.Stream takes them (nil: unset).
type Stream struct {
	Shards     int
	Proportion *float64
	Repeat     *float64
	Choose     *int64
}

// planStreams returns the planner's streams over the shards' sample
// counts sizes.
func (c *Config) planStreams(sizes []int64) ([]plan.Stream, error) {
	if len(c.Streams) == 0 {
		return []plan.Stream{{ShardSizes: sizes}}, nil
	}
	out := make([]plan.Stream, len(c.Streams))
	at := 0
	for i, st := range c.Streams {
		if st.Shards <= 0 || st.Shards > len(sizes)-at {
			return nil, fmt.Errorf("%w: stream %d: %d shards, with %d of the dataset's %d left", ErrInvalid, i, st.Shards, len(sizes)-at, len(sizes))
		}
		out[i] = plan.Stream{ShardSizes: sizes[at : at+st.Shards], Proportion: st.Proportion, Repeat: st.Repeat, Choose: st.Choose}
		at += st.Shards
	}
	if at != len(sizes) {
		return nil, fmt.Errorf("%w: the streams hold %d of the dataset's %d shards", ErrInvalid, at, len(sizes))
	}
	return out, nil
}

func (c *Config) validate() error {
	if len(c.Dataset.Shards) == 0 {
		return fmt.Errorf("%w: the dataset has no shards", ErrInvalid)
	}
	if c.Plan.BatchSize <= 0 {
		return fmt.Errorf("%w: batch size must be positive", ErrInvalid)
	}
	if c.Shape.Nodes <= 0 || c.Shape.RanksPerNode <= 0 || c.Shape.WorkersPerRank <= 0 {
		return fmt.Errorf("%w: nodes, ranks per node and workers per rank must be positive (%d, %d, %d)",
			ErrInvalid, c.Shape.Nodes, c.Shape.RanksPerNode, c.Shape.WorkersPerRank)
	}
	if c.WorkerStart < 0 {
		return fmt.Errorf("%w: worker start must not be negative", ErrInvalid)
	}
	if c.Epochs < 0 || c.IndexRequests < 0 || c.Predownload < 0 || c.CacheLimit < 0 || c.PrefetchConcurrency < 0 || c.DecodeCost < 0 || c.PrefetchFactor < 0 {
		return fmt.Errorf("%w: epochs, predownload, cache limit, prefetch concurrency, prefetch factor and decode cost must not be negative", ErrInvalid)
	}
	if c.Dataset.IndexBytes < 0 || c.Dataset.OpenBytes < 0 || c.Dataset.IndexStampBytes < 0 {
		return fmt.Errorf("%w: the index's sizes must not be negative", ErrInvalid)
	}
	if c.Store.Latency < 0 || c.Store.BandwidthPerNode < 0 || c.Store.BandwidthTotal < 0 {
		return fmt.Errorf("%w: latency and bandwidths must not be negative", ErrInvalid)
	}
	for _, n := range c.Nodes {
		if n < 0 || n >= c.Shape.Nodes {
			return fmt.Errorf("%w: node %d outside %d nodes", ErrInvalid, n, c.Shape.Nodes)
		}
	}
	for i, s := range c.Dataset.Shards {
		if s.Samples < 0 || s.StoredBytes < 0 || s.CachedBytes < 0 || s.Footprint < 0 || s.Files < 0 || s.Requests < 0 {
			return fmt.Errorf("%w: shard %d has a negative size", ErrInvalid, i)
		}
	}
	return nil
}

// predownload is one consumer's prefetch window, as stream's Options:
// prefetch.DefaultWindow over the dataset's average shard when unset.
func (c *Config) predownload() int {
	if c.Predownload > 0 {
		return c.Predownload
	}
	var samples int64
	for _, s := range c.Dataset.Shards {
		samples += s.Samples
	}
	var avg int64
	if n := int64(len(c.Dataset.Shards)); n > 0 && samples > 0 {
		avg = (samples + n - 1) / n
	}
	return prefetch.DefaultWindow(c.Plan.BatchSize, c.PrefetchConcurrency, avg)
}

func (c *Config) indexRequests() int {
	if c.IndexRequests > 0 {
		return c.IndexRequests
	}
	return 1
}

// readAhead is how many batches the training loop has requested from the
// workers ahead of the one it waits for (prefetch factor × workers), 0
// without workers (RankIterator).
func (c *Config) readAhead() int {
	if c.RankIterator {
		return 0
	}
	f := c.PrefetchFactor
	if f == 0 {
		f = 2
	}
	return f * c.Shape.WorkersPerRank
}

// workerStart is WorkerStart in seconds (0 with RankIterator).
func (c *Config) workerStart() float64 {
	if c.RankIterator {
		return 0
	}
	return c.WorkerStart.Seconds()
}

func (c *Config) concurrency() int {
	if c.PrefetchConcurrency > 0 {
		return c.PrefetchConcurrency
	}
	return 8
}

// consumers returns the iterators of one node.
func (c *Config) consumers() int {
	if c.RankIterator {
		return c.Shape.RanksPerNode
	}
	return c.Shape.RanksPerNode * c.Shape.WorkersPerRank
}

// bandwidth returns one node's download rate (0: unlimited).
func (c *Config) bandwidth(nodes int) float64 {
	bw := c.Store.BandwidthPerNode
	if c.Store.BandwidthTotal > 0 {
		share := c.Store.BandwidthTotal / float64(max(nodes, 1))
		if bw == 0 || share < bw {
			bw = share
		}
	}
	return bw
}
