package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sluicedata/sluice/agentapi"
	"github.com/sluicedata/sluice/cache"
	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/plan"
	"github.com/sluicedata/sluice/stream"
)

// sharedDataset is one opened dataset, shared by every handle with the same
// identity, whatever job opened it. Its stream.Dataset serves random access
// and describes the shards; iterations run on per-worker cursors (see job).
type sharedDataset struct {
	key  string
	opts stream.Options
	ds   *stream.Dataset
	// The wire description of the shards, computed once.
	schemas      []agentapi.Schema
	shardSchema  []int
	shardSamples []int64
	shardBytes   []int64  // raw data file size of each shard
	shardURLs    []string // each shard's URL after shardURLPrefix, for datasets with tar shards
	// shardURLPrefix is the prefix common to the shard URLs.
	shardURLPrefix string
	refs           int // handles on it; guarded by Agent.mu
	// env is the store settings of the jobs that share it (the key
	// includes their fingerprint); cursors open their stores with it.
	env jobEnv
	// dirs are the local directories it caches remotes into (cacheDirs).
	dirs map[string]string
}

// defaultCacheRoot is where datasets opened without local are cached.
func defaultCacheRoot() string {
	return filepath.Join(os.TempDir(), "sluice-cache-"+fmt.Sprint(os.Getuid()))
}

// streamOptions maps the wire arguments onto stream.Options. The cache
// root is the dataset's local directory (or a per-user default); every
// dataset under one root shares one cache.Cache, and so one limit and one
// set of downloads.
func (a *Agent) streamOptions(ctx context.Context, ds agentapi.Dataset) (stream.Options, error) {
	o := stream.Options{
		Remote:              ds.Remote,
		Local:               ds.Local,
		Split:               ds.Split,
		Registry:            a.registry,
		Retry:               a.opts.Retry,
		ValidateHash:        ds.ValidateHash,
		KeepZip:             ds.KeepZip,
		SamplingMethod:      ds.SamplingMethod,
		SamplingGranularity: ds.SamplingGranularity,
		PartitionAlgo:       ds.PartitionAlgo,
		NumCanonicalNodes:   ds.NumCanonicalNodes,
		BatchSize:           ds.BatchSize,
		Shuffle:             ds.Shuffle,
		ShuffleAlgo:         ds.ShuffleAlgo,
		ShuffleSeed:         ds.ShuffleSeed,
		ShuffleBlockSize:    ds.ShuffleBlockSize,
		BatchingMethod:      ds.BatchingMethod,
		AllowUnsafeTypes:    ds.AllowUnsafeTypes,
		Replication:         ds.Replication,
		OrderAdmissions:     ds.OrderAdmissions,
	}
	if ds.DownloadRetry != nil {
		o.DownloadRetry = *ds.DownloadRetry
	}
	if ds.DownloadTimeout != nil {
		o.DownloadTimeout = seconds(*ds.DownloadTimeout)
	}
	if ds.Predownload != nil {
		o.Predownload = *ds.Predownload
	}
	if ds.EpochSize != "" {
		n, err := stream.ParseEpochSize(ds.EpochSize)
		if err != nil {
			return o, &agentapi.Error{Code: agentapi.CodeInvalid, Message: fmt.Sprintf("epoch_size: %v", err)}
		}
		o.EpochSize = n
	}
	var limit int64
	if ds.CacheLimit != "" {
		n, err := stream.ParseBytes(ds.CacheLimit)
		if err != nil {
			return o, &agentapi.Error{Code: agentapi.CodeInvalid, Message: fmt.Sprintf("cache_limit: %v", err)}
		}
		limit = n
	}
	paths := []string{ds.Local}
	for _, s := range ds.Streams {
		paths = append(paths, s.Local)
	}
	for _, p := range paths {
		if p != "" && !filepath.IsAbs(p) {
			return o, badRequestf("local %q must be an absolute path (the agent runs in another directory)", p)
		}
	}
	remote := ds.Remote != ""
	for _, s := range ds.Streams {
		st := stream.Stream{
			Remote: s.Remote, Local: s.Local, Split: s.Split,
			Proportion: s.Proportion, Repeat: s.Repeat, Choose: s.Choose,
			DownloadRetry: s.DownloadRetry, KeepZip: s.KeepZip,
		}
		if s.DownloadTimeout != nil {
			d := seconds(*s.DownloadTimeout)
			st.DownloadTimeout = &d
		}
		if s.ValidateHash != "" {
			v := s.ValidateHash
			st.ValidateHash = &v
		}
		remote = remote || s.Remote != ""
		o.Streams = append(o.Streams, st)
	}
	if !remote || (len(ds.Streams) == 0 && sameLocal(ds.Remote, ds.Local)) {
		// Local data is read in place: nothing to cache.
		return o, nil
	}
	root := ds.Local
	if root == "" && len(ds.Streams) > 0 {
		// MosaicML users give each Stream its own local and no dataset
		// local: cache under the directory that holds them all.
		var locals []string
		for _, s := range ds.Streams {
			if s.Remote != "" {
				locals = append(locals, s.Local)
			}
		}
		root = commonDir(locals)
	}
	if root == "" {
		root = defaultCacheRoot()
	}
	c, err := a.cacheFor(ctx, root, limit)
	if err != nil {
		return o, err
	}
	o.Cache = c
	return o, nil
}

// commonDir returns the deepest directory containing every path, or "" if
// a path is empty or they share only the root.
func commonDir(paths []string) string {
	if len(paths) == 0 {
		return ""
	}
	common := ""
	for i, p := range paths {
		if p == "" {
			return ""
		}
		p = filepath.Clean(p)
		if i == 0 {
			common = p
			continue
		}
		for common != "/" && p != common && !strings.HasPrefix(p, common+string(filepath.Separator)) {
			common = filepath.Dir(common)
		}
	}
	if common == "/" {
		return ""
	}
	return common
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func sameLocal(remote, local string) bool {
	if local == "" || (strings.Contains(remote, "://") && !strings.HasPrefix(remote, "file://")) {
		return false
	}
	return filepath.Clean(strings.TrimPrefix(remote, "file://")) == filepath.Clean(local)
}

// cacheFor returns the agent's cache rooted at dir, opening it with limit
// on first use. Later datasets under the same root share it and its limit.
func (a *Agent) cacheFor(ctx context.Context, dir string, limit int64) (*cache.Cache, error) {
	a.cacheMu.Lock()
	defer a.cacheMu.Unlock()
	if c, ok := a.caches[dir]; ok {
		if !cacheGone(c) {
			return c, nil
		}
		// The user removed the directory while the agent ran: open it
		// afresh (the old Cache is closed at shutdown; datasets still on
		// it keep their handles).
		a.retired = append(a.retired, c)
		delete(a.caches, dir)
	}
	c, err := cache.Open(ctx, dir, &cache.Options{Limit: limit, Memory: a.cacheMemory})
	if err != nil {
		return nil, err
	}
	a.caches[dir] = c
	return c, nil
}

// cacheGone reports whether c's directory no longer exists.
func cacheGone(c *cache.Cache) bool {
	_, err := os.Stat(c.Dir())
	return errors.Is(err, fs.ErrNotExist)
}

// openDataset opens a stream.Dataset and describes its shards for the wire.
func (a *Agent) openDataset(ctx context.Context, key string, spec agentapi.Dataset, env jobEnv) (*sharedDataset, error) {
	ctx = withEnv(ctx, env)
	o, err := a.streamOptions(ctx, spec)
	if err != nil {
		return nil, err
	}
	ds, err := stream.Open(withDataset(ctx, metricsName(&o)), &o)
	if err != nil {
		return nil, err
	}
	d := &sharedDataset{key: key, opts: o, ds: ds, env: env, dirs: cacheDirs(spec)}
	n := ds.NumShards()
	d.shardSchema = make([]int, n)
	d.shardSamples = make([]int64, n)
	d.shardBytes = make([]int64, n)
	// Shards of a dataset nearly always share one configuration: the
	// schema is built and compared once per run of shards with one
	// configuration number, not for each of 40k shards (whose ShardInfo
	// the stream then never makes).
	var prev *format.ShardInfo
	prevCfg, k := -1, 0
	for i := range n {
		if cfg := ds.ShardConfig(i); cfg != prevCfg {
			si := ds.ConfigInfo(cfg)
			if prev == nil || !sameSchemaFields(prev, si) {
				s := schemaOf(si)
				k = slices.IndexFunc(d.schemas, func(t agentapi.Schema) bool { return sameSchema(s, t) })
				if k < 0 {
					k = len(d.schemas)
					d.schemas = append(d.schemas, s)
				}
			}
			if si.Format == "wds" && d.shardURLs == nil {
				d.shardURLs = make([]string, n)
			}
			prev, prevCfg = si, cfg
		}
		d.shardSchema[i] = k
		d.shardSamples[i] = ds.ShardSamples(i)
		d.shardBytes[i] = ds.ShardBytes(i)
	}
	for i := range d.shardURLs {
		d.shardURLs[i] = ds.ShardURL(i)
	}
	d.shardURLPrefix = commonPrefix(d.shardURLs)
	for i := range d.shardURLs {
		d.shardURLs[i] = d.shardURLs[i][len(d.shardURLPrefix):]
	}
	return d, nil
}

func schemaOf(si *format.ShardInfo) agentapi.Schema {
	s := agentapi.Schema{Format: si.Format, ColumnNames: si.ColumnNames, ColumnEncodings: si.ColumnEncodings, Separator: si.Separator}
	if si.Format == "json" && len(si.ColumnNames) == 0 {
		for name := range si.Columns {
			s.ColumnNames = append(s.ColumnNames, name)
		}
		slices.Sort(s.ColumnNames)
		for _, name := range s.ColumnNames {
			s.ColumnEncodings = append(s.ColumnEncodings, si.Columns[name])
		}
	}
	s.ColumnSizes = make([]*int64, len(s.ColumnNames))
	for i := range s.ColumnSizes {
		if i < len(si.ColumnSizes) && si.ColumnSizes[i] > 0 {
			v := int64(si.ColumnSizes[i])
			s.ColumnSizes[i] = &v
		}
	}
	return s
}

// sameSchemaFields reports whether two shards certainly have the same
// schema: equal fields schemaOf reads (JSON shards, whose schema may come
// from their columns map, are never taken as equal here).
func sameSchemaFields(a, b *format.ShardInfo) bool {
	return a.Format == b.Format && a.Format != "json" && a.Separator == b.Separator &&
		slices.Equal(a.ColumnNames, b.ColumnNames) && slices.Equal(a.ColumnEncodings, b.ColumnEncodings) &&
		slices.Equal(a.ColumnSizes, b.ColumnSizes)
}

func sameSchema(a, b agentapi.Schema) bool {
	eq := func(x, y *int64) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	return a.Format == b.Format && a.Separator == b.Separator &&
		slices.Equal(a.ColumnNames, b.ColumnNames) && slices.Equal(a.ColumnEncodings, b.ColumnEncodings) &&
		slices.EqualFunc(a.ColumnSizes, b.ColumnSizes, eq)
}

// info describes the dataset for a consumer placed at w.
func (d *sharedDataset) info(w agentapi.World) (agentapi.Opened, error) {
	pw := planWorld(w, d.opts.Replication)
	n, err := d.ds.RankLen(pw)
	if err != nil {
		return agentapi.Opened{}, err
	}
	out := agentapi.Opened{
		NumSamples:        d.ds.Len(),
		EpochSize:         d.ds.EpochSize(),
		Length:            n,
		Schemas:           d.schemas,
		ShardSchema:       d.shardSchema,
		ShardSamples:      d.shardSamples,
		ShardURLs:         d.shardURLs,
		ShardURLPrefix:    d.shardURLPrefix,
		NumCanonicalNodes: d.opts.NumCanonicalNodes,
		ShuffleSeed:       plan.DefaultShuffleSeed,
	}
	if d.opts.ShuffleSeed != nil {
		out.ShuffleSeed = *d.opts.ShuffleSeed
	}
	for _, sw := range d.ds.Planner().Streams() {
		out.Streams = append(out.Streams, agentapi.StreamWeight{Proportion: sw.Proportion, Repeat: sw.Repeat, Choose: sw.Choose,
			Samples: sw.Samples, FirstShard: sw.FirstShard, FirstSample: sw.FirstSample})
	}
	return out, nil
}

// planWorld maps the wire world onto plan's.
func planWorld(w agentapi.World, replication int) plan.World {
	ws, lws := max(w.WorldSize, 1), max(w.LocalWorldSize, 1)
	return plan.World{Nodes: ws / lws, RanksPerNode: lws, Rank: w.Rank, Replication: replication}
}

// get returns sample index as an inlined location (random access copies
// the record once; no lease outlives the call).
func (d *sharedDataset) get(ctx context.Context, index int64) (location, []byte, error) {
	if index < 0 || index >= d.ds.Len() {
		return location{}, nil, badRequestf("sample index %d outside [0, %d)", index, d.ds.Len())
	}
	shard, _, err := d.ds.Planner().Locate(index)
	if err != nil {
		return location{}, nil, err
	}
	rec, err := d.ds.Record(ctx, index, nil)
	if err != nil {
		return location{}, nil, err
	}
	return location{sample: index, shard: shard, size: d.shardBytes[shard], length: int64(len(rec)), release: func() {}}, rec, nil
}

// cursor returns the stream.Dataset that plays the epochs of one (rank,
// worker) of a job: its epoch counter is MosaicML's next_epoch for that
// worker, so workers never wait for one another at a barrier. Cursors are
// stream.Dataset.Cursor of the job's shared dataset: every rank and
// worker of the node uses the one parsed index, store handles and
// planner (whose shuffle preparation they then share), instead of
// opening the dataset again each. The job holds a reference on the
// shared dataset (acquireJob), so it outlives the cursors.
func (a *Agent) cursor(_ context.Context, j *job, rank, worker int) (*stream.Dataset, error) {
	k := [2]int{rank, worker}
	a.mu.Lock()
	defer a.mu.Unlock()
	if c, ok := j.cursors[k]; ok {
		return c, nil
	}
	if j.closed {
		return nil, &agentapi.Error{Code: agentapi.CodeClosed, Message: "job closed"}
	}
	// The job's workers take their turns (OrderAdmissions) among
	// themselves, not with another job's reading the same dataset.
	c := j.ds.ds.CursorIn(j.group)
	j.cursors[k] = c
	return c, nil
}

func planState(s agentapi.State) plan.State {
	ps := plan.State{Epoch: s.Epoch, SampleInEpoch: s.SampleInEpoch, NumCanonicalNodes: s.NumCanonicalNodes, ShuffleSeed: s.ShuffleSeed}
	if s.InitialPhysicalNodes != nil {
		ps.InitialPhysicalNodes = int(*s.InitialPhysicalNodes)
	}
	return ps
}

// classify maps errors of the packages the agent serves to a wire code.
func classify(err error) agentapi.Code {
	switch {
	case errors.Is(err, format.ErrCorrupt), errors.Is(err, stream.ErrHashMismatch):
		return agentapi.CodeCorrupt
	case errors.Is(err, plan.ErrInvalid), errors.Is(err, plan.ErrBadState):
		return agentapi.CodeInvalid
	case errors.Is(err, cache.ErrLimitTooSmall):
		return agentapi.CodeCacheLimit
	}
	return agentapi.CodeInternal
}

// commonPrefix returns the longest prefix of every string in ss.
func commonPrefix(ss []string) string {
	if len(ss) == 0 {
		return ""
	}
	p := ss[0]
	for _, s := range ss[1:] {
		n := 0
		for n < len(p) && n < len(s) && p[n] == s[n] {
			n++
		}
		p = p[:n]
	}
	return p
}
