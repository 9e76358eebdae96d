package stream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/sluicedata/sluice/cache"
	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/compress"
	"github.com/sluicedata/sluice/format/jsonl"
	"github.com/sluicedata/sluice/format/mds"
	"github.com/sluicedata/sluice/format/wds"
	"github.com/sluicedata/sluice/format/xsv"
	"github.com/sluicedata/sluice/internal/atomicfile"
)

// openShard is a leased, opened shard shared by every reader of the
// dataset in this process.
type openShard struct {
	shard int
	lease *cache.Lease // nil for a local-only stream
	path  string       // raw data file
	meta  string       // raw meta file of a split-format (json, csv, tsv, xsv) shard
	r     format.Shard
	url   string // a tar shard's URL, WebDataset's __url__ of its samples
	refs  int    // guarded by shardTable.mu

	// readPath is the file r reads (the lease's ReadPath when opened), and
	// mem whether r reads a memory block the lease owns (then it cannot
	// outlive the lease). Both decide whether the shard may stay open
	// idle (shardTable.idle).
	readPath string
	mem      bool
	// fid is the lease's FileID when r was opened: a later lease with the
	// same one reads the same file, which stayed locked in between.
	fid uint64
	// prev and next link an idle shard into shardTable's idle list
	// (guarded by shardTable.mu).
	prev, next *openShard
}

// sample decodes sample j.
func (o *openShard) sample(j int) (format.Sample, error) {
	type sampler interface {
		Sample(j int) (format.Sample, error)
	}
	s, ok := o.r.(sampler)
	if !ok {
		return nil, fmt.Errorf("stream: shard %s cannot decode samples", o.path)
	}
	out, err := s.Sample(j)
	if err == nil && o.url != "" {
		out[wds.URLField] = o.url
	}
	return out, err
}

// maxIdleShards bounds the shards a shardTable keeps open with no reader
// (a mapping and its parsed sample offsets each; no file descriptor, no
// lease), and maxIdleTotal those of a dataset and all its cursors
// together (an agent has a cursor per rank and worker of every job), well
// below Linux's default limit of 65,530 mappings a process.
const (
	maxIdleShards = 256
	maxIdleTotal  = 8192
)

// shardTable shares opened shards between the dataset's readers.
//
// A shuffled epoch (py1e, py1b, ...) interleaves the samples of many
// shards: a reader changes shard at nearly every sample, and the last
// reader of a shard leaving it used to close it, so the next sample of it
// mapped and parsed the shard again (a warm shuffled epoch of 2,000-sample
// shards spent ~90% of its CPU there, 24 µs a sample against 0.15 µs in
// order). So a shard whose last reader leaves stays open, idle, in an LRU
// list of at most maxIdleShards, where nothing evicts it: only where that
// cannot hold disk the cache could otherwise free, that is for local-only
// streams and caches without a limit (nothing is ever evicted there), for
// shards read from a file (a memory-fetched shard's block belongs to its
// lease). An idle shard holds no lease: taking it again takes a lease as
// opening it would (the same hit or fetch, the same figures), and keeps
// the open file only if the lease reads the same path.
type shardTable struct {
	d  *Dataset
	mu sync.Mutex
	m  map[int]*openShard // open shards, in use or idle

	// idle lists the shards with no reader, most recently released first.
	idleHead, idleTail *openShard
	idleLen            int
	maxIdle            int // maxIdleShards; less in tests
}

func newShardTable(d *Dataset) *shardTable {
	return &shardTable{d: d, m: make(map[int]*openShard), maxIdle: maxIdleShards}
}

// acquire returns shard opened and leased, and whether it was already
// local (a cache hit). With early, a shard being fetched may be opened
// from its complete temporary file, before its sync and rename (see
// cache.Dataset.AcquireEarly).
func (t *shardTable) acquire(ctx context.Context, shard int, early bool) (*openShard, bool, error) {
	t.mu.Lock()
	var idle *openShard
	if o := t.m[shard]; o != nil {
		if o.refs > 0 {
			o.refs++
			t.mu.Unlock()
			return o, true, nil
		}
		// Idle: it is this caller's alone until it is back in the table.
		t.unlinkIdle(o)
		delete(t.m, shard)
		idle = o
	}
	t.mu.Unlock()
	var (
		o   *openShard
		hit bool
		err error
	)
	if idle != nil {
		o, hit, err = t.d.reopen(ctx, idle, early)
	} else {
		o, hit, err = t.d.open(ctx, shard, early)
	}
	if err != nil {
		return nil, false, err
	}
	return t.adopt(o), hit, nil
}

// adopt puts o, opened and leased by acquire, in the table with one
// reference, and returns it, or the shard another reader opened meanwhile
// (closing o) if that one is in use. One opened and released meanwhile is
// idle, holding no lease: o, which holds one, replaces it. (Taking the
// idle one and closing o left a reader on a shard without a lease: a
// training process's iteration and a DataLoader worker's share a table in
// the agent, and the cache evicted a shard one of them was reading.)
func (t *shardTable) adopt(o *openShard) *openShard {
	t.mu.Lock()
	cur := t.m[o.shard]
	if cur != nil && cur.refs > 0 {
		cur.refs++
		t.mu.Unlock()
		o.close()
		return cur
	}
	if cur != nil {
		t.unlinkIdle(cur)
	}
	o.refs = 1
	t.m[o.shard] = o
	t.mu.Unlock()
	if cur != nil {
		cur.close()
	}
	return o
}

// ref takes another reference on an acquired shard.
func (t *shardTable) ref(o *openShard) {
	t.mu.Lock()
	o.refs++
	t.mu.Unlock()
}

// release drops a reference. The last one gives the lease back and
// closes the shard, or keeps it open idle where it may (see shardTable).
func (t *shardTable) release(o *openShard) {
	t.mu.Lock()
	o.refs--
	if o.refs > 0 {
		t.mu.Unlock()
		return
	}
	if !t.d.mayKeepIdle(o) {
		delete(t.m, o.shard)
		t.mu.Unlock()
		o.close()
		return
	}
	lease := o.lease
	o.lease = nil
	t.pushIdle(o)
	var drop *openShard
	if t.idleLen > t.maxIdle || t.d.root().idleShards.Load() > maxIdleTotal {
		drop = t.idleTail
		t.unlinkIdle(drop)
		delete(t.m, drop.shard)
	}
	t.mu.Unlock()
	if lease != nil {
		lease.Release()
	}
	if drop != nil {
		drop.close()
	}
}

// closeIdle closes every idle shard.
func (t *shardTable) closeIdle() {
	t.mu.Lock()
	var idle []*openShard
	for o := t.idleHead; o != nil; o = o.next {
		idle = append(idle, o)
		delete(t.m, o.shard)
	}
	t.d.root().idleShards.Add(-int64(t.idleLen))
	t.idleHead, t.idleTail, t.idleLen = nil, nil, 0
	t.mu.Unlock()
	for _, o := range idle {
		o.prev, o.next = nil, nil
		o.close()
	}
}

// pushIdle puts o first in the idle list; t.mu held.
func (t *shardTable) pushIdle(o *openShard) {
	o.prev, o.next = nil, t.idleHead
	if t.idleHead != nil {
		t.idleHead.prev = o
	} else {
		t.idleTail = o
	}
	t.idleHead = o
	t.idleLen++
	t.d.root().idleShards.Add(1)
}

// unlinkIdle takes o out of the idle list; t.mu held.
func (t *shardTable) unlinkIdle(o *openShard) {
	if o.prev != nil {
		o.prev.next = o.next
	} else {
		t.idleHead = o.next
	}
	if o.next != nil {
		o.next.prev = o.prev
	} else {
		t.idleTail = o.prev
	}
	o.prev, o.next = nil, nil
	t.idleLen--
	t.d.root().idleShards.Add(-1)
}

func (o *openShard) close() {
	if o.r != nil {
		o.r.Close()
	}
	if o.lease != nil {
		o.lease.Release()
	}
}

// root returns the Dataset that Open returned: d, or the one d is a
// cursor of.
func (d *Dataset) root() *Dataset {
	if d.parent != nil {
		return d.parent
	}
	return d
}

// mayKeepIdle reports whether o may stay open with no reader: an MDS
// shard read from a file (see shardTable).
func (d *Dataset) mayKeepIdle(o *openShard) bool {
	if o.mem || o.r == nil {
		return false
	}
	_, ok := o.r.(*mds.Shard)
	return ok
}

// evicted closes shard wherever it is idle in the root d's tables: the
// cache of this process deleted its files, or no longer keeps other
// processes from evicting them (cache.Dataset.OnEvict), and a mapping
// would keep their blocks.
func (d *Dataset) evicted(shard int) {
	d.tablesMu.Lock()
	tables := make([]*shardTable, 0, len(d.tables))
	for t := range d.tables {
		tables = append(tables, t)
	}
	d.tablesMu.Unlock()
	ref := d.shards[shard]
	cds := d.streams[ref.stream].cds
	for _, t := range tables {
		t.mu.Lock()
		o := t.m[shard]
		if o == nil || o.refs > 0 || (cds != nil && cds.Holds(ref.local, o.fid)) {
			// In use, or idle on a file the cache holds again (the call
			// is about an earlier hold).
			t.mu.Unlock()
			continue
		}
		t.unlinkIdle(o)
		delete(t.m, shard)
		t.mu.Unlock()
		o.close()
	}
}

// reopen makes an idle shard current again: for a cached stream it takes
// the shard's lease as open would, and keeps the open file if the lease
// reads the same one, held since (the same cache.Lease.FileID: the cache
// kept it locked, idle, so no process evicted it), else closes it and
// opens the shard anew.
func (d *Dataset) reopen(ctx context.Context, o *openShard, early bool) (*openShard, bool, error) {
	ref := d.shards[o.shard]
	st := d.streams[ref.stream]
	if st.cds == nil {
		return o, true, nil
	}
	l, err := leaseShard(ctx, st, ref.local, early)
	if err != nil {
		o.close()
		return nil, false, fmt.Errorf("stream: shard %d: %w", o.shard, err)
	}
	if o.fid != 0 && l.FileID() == o.fid && l.Bytes() == nil {
		o.lease = l
		return o, l.Hit(), nil
	}
	l.Release()
	o.close()
	return d.open(ctx, o.shard, early)
}

// leaseShard leases st's shard local from the node's cache (early: a
// fetch in progress may be read). Missing shards are downloaded through
// this dataset's own store (its job's credentials), not the store that
// registered the directory with the node's cache (invariant 8).
func leaseShard(ctx context.Context, st *streamState, local int, early bool) (*cache.Lease, error) {
	via := st.cds.Via(st.bucket)
	if early {
		return via.AcquireEarly(ctx, local)
	}
	return via.Acquire(ctx, local)
}

// open leases shard (fetching it if needed) and opens its raw file.
func (d *Dataset) open(ctx context.Context, shard int, early bool) (*openShard, bool, error) {
	ref := d.shards[shard]
	st := d.streams[ref.stream]
	info := st.info(ref.local)
	o := &openShard{shard: shard}
	if info.Format == wds.Format {
		o.url = d.ShardURL(shard)
	}
	hit := true
	if st.cds != nil {
		l, err := leaseShard(ctx, st, ref.local, early)
		if err != nil {
			return nil, false, fmt.Errorf("stream: shard %d: %w", shard, err)
		}
		hit = l.Hit()
		o.lease = l
		o.path = l.Path(0)
		if info.RawMeta != nil {
			o.meta = l.Path(1)
		}
		// The lease may have come before the shard's files were synced
		// and renamed into place: read them where they are now.
		meta := ""
		if info.RawMeta != nil {
			meta = l.ReadPath(1)
		}
		if b := l.Bytes(); b != nil && info.Format == "mds" && info.RawMeta == nil {
			// Fetched in memory (cache.Options.Memory): read from there.
			r, err := mds.OpenBytes(b, info)
			if err != nil {
				o.close()
				return nil, false, fmt.Errorf("stream: shard %d: %w", shard, err)
			}
			o.r, o.mem = r, true
			return o, hit, nil
		}
		o.readPath = l.ReadPath(0)
		r, err := d.openFormat(o.readPath, meta, info)
		if errors.Is(err, fs.ErrNotExist) {
			// Renamed meanwhile: the same bytes are now in place.
			if err = l.Committed(ctx); err == nil {
				o.readPath = o.path
				r, err = d.openFormat(o.path, o.meta, info)
			}
		}
		if err != nil {
			o.close()
			return nil, false, fmt.Errorf("stream: shard %d: %w", shard, err)
		}
		o.r, o.fid = r, l.FileID()
		return o, hit, nil
	} else {
		p, err := st.localRaw(info)
		if err != nil {
			return nil, false, fmt.Errorf("stream: shard %d: %w", shard, err)
		}
		o.path = p
		if info.RawMeta != nil {
			if o.meta, err = st.localFile(info, *info.RawMeta, info.ZipMeta); err != nil {
				return nil, false, fmt.Errorf("stream: shard %d: %w", shard, err)
			}
		}
	}
	r, err := d.openFormat(o.path, o.meta, info)
	if err != nil {
		o.close()
		return nil, false, fmt.Errorf("stream: shard %d: %w", shard, err)
	}
	o.r = r
	return o, hit, nil
}

// openFormat opens a raw shard file of any supported format; meta is the
// raw meta file of the split formats.
func (d *Dataset) openFormat(path, meta string, info *format.ShardInfo) (format.Shard, error) {
	switch info.Format {
	case "mds":
		return mds.OpenFile(path, info)
	case jsonl.Format:
		return jsonl.OpenFiles(path, meta, info)
	case xsv.CSV, xsv.TSV, xsv.XSV:
		return xsv.OpenFiles(path, meta, info)
	case wds.Format:
		return d.tarIndex.open(path, info)
	default:
		return nil, fmt.Errorf("%s: shard format %q is not supported for streaming", path, info.Format)
	}
}

// localRaw returns the raw data file of a local-only shard, decompressing
// it next to its compressed form (kept) when only that exists.
func (st *streamState) localRaw(info *format.ShardInfo) (string, error) {
	return st.localFile(info, info.RawData, info.ZipData)
}

// localFile is localRaw for any file of the shard (data or meta).
func (st *streamState) localFile(info *format.ShardInfo, rawInfo format.FileInfo, zipInfo *format.FileInfo) (string, error) {
	raw := filepath.Join(st.dir, filepath.FromSlash(rawInfo.Basename))
	if _, err := os.Stat(raw); err == nil || zipInfo == nil {
		return raw, err
	}
	st.inflating.Lock()
	defer st.inflating.Unlock()
	if _, err := os.Stat(raw); err == nil {
		return raw, nil
	}
	zip := filepath.Join(st.dir, filepath.FromSlash(zipInfo.Basename))
	b, err := readSized(zip, zipInfo)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%s: neither the shard nor its compressed form %s exists", raw, zip)
	}
	if err != nil {
		return "", err
	}
	out, err := compress.Decompress(info.Family(), b, rawInfo.Bytes)
	if err != nil {
		return "", fmt.Errorf("decompress %s: %w", zip, err)
	}
	if int64(len(out)) != rawInfo.Bytes {
		return "", fmt.Errorf("decompress %s: got %d bytes, the index says %d", zip, len(out), rawInfo.Bytes)
	}
	return raw, atomicfile.WriteFile(raw, 0o644, out)
}

// readSized reads the file at path, which the index says has fi.Bytes
// bytes. The size is checked before anything is read, so a wrong (or
// sparse) file cannot make the reader allocate more than the index
// declares; a mismatch is a *format.CorruptError.
func readSized(path string, fi *format.FileInfo) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if info.Size() != fi.Bytes {
		return nil, &format.CorruptError{File: fi.Basename, Shard: -1, Sample: -1, Offset: -1,
			Reason: fmt.Sprintf("%s has %d bytes, index says %d", path, info.Size(), fi.Bytes)}
	}
	b := make([]byte, fi.Bytes)
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return b, nil
}
