package cli

import (
	"context"
	"fmt"
	"github.com/sluicedata/sluice/storage"
	"io"
	"sync/atomic"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/stream"
)

// readSimTarIndex reads the index of a WebDataset tar dataset as the
// stream does: the shards of a tar dataset spec (a brace pattern, a "::"
// list or a .tar URL: stream.ParseTarDataset) with the index beside
// them or one built from their headers, or, with every, the tars of a
// directory or store root that holds no index.json. It returns the index
// as index.json's bytes and ok false when src is no tar dataset.
func readSimTarIndex(ctx context.Context, e *env, src string, every bool) (data []byte, name string, ok bool, open simOpen, err error) {
	td, err := stream.ParseTarDataset(src)
	if err != nil {
		return nil, "", true, simOpen{}, fmt.Errorf("simulate: %w", err)
	}
	root, keys := src, []string(nil)
	switch {
	case td != nil:
		root, keys = td.Root, td.Keys
	case !every:
		return nil, "", false, simOpen{}, nil
	}
	b, err := openStore(ctx, e, root)
	if err != nil {
		return nil, "", true, simOpen{}, fmt.Errorf("simulate: %w", err)
	}
	defer b.Close()
	cb := &countingBucket{Bucket: b}
	idx, err := stream.ReadTarIndex(ctx, cb, keys)
	if err != nil {
		if td == nil {
			return nil, "", false, simOpen{}, nil // no tars either: the caller's error stands
		}
		return nil, "", true, simOpen{}, fmt.Errorf("simulate: %s: %w", src, err)
	}
	return format.AppendIndex(nil, idx), src, true, cb.open(), nil
}

// countingBucket counts the requests made through it while the dataset's
// index is read the way stream.Open reads it, so that the model opens the
// dataset with as many (sim.Config.IndexRequests).
type countingBucket struct {
	storage.Bucket
	requests atomic.Int64
	// read counts the bytes read from the readers it opened.
	read atomic.Int64
	// indexRead: index.json was read, told: its response described it
	// (storage.InfoReader), scanned: a shard was read (a tar index built
	// from the shards' headers).
	indexRead, told, scanned atomic.Bool
	// etag is the ETag index.json's response told (told).
	etag atomic.Pointer[string]
}

func (b *countingBucket) Stat(ctx context.Context, key string) (storage.ObjectInfo, error) {
	b.requests.Add(1)
	return b.Bucket.Stat(ctx, key)
}

func (b *countingBucket) List(ctx context.Context, prefix string, fn func(storage.ObjectInfo) error) error {
	b.requests.Add(1)
	return b.Bucket.List(ctx, prefix, fn)
}

func (b *countingBucket) NewRangeReader(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	b.requests.Add(1)
	r, err := b.Bucket.NewRangeReader(ctx, key, off, length)
	if err == nil {
		r = &countingReader{ReadCloser: r, n: &b.read}
	}
	switch {
	case key != format.IndexFile:
		b.scanned.Store(true)
	case err == nil:
		b.indexRead.Store(true)
		info, told := storage.ReaderInfo(r)
		b.told.Store(told)
		if told {
			b.etag.Store(&info.ETag)
		}
	}
	return r, err
}

// countingReader counts the bytes read through it into n, and passes on
// what the reader it wraps tells of its object (storage.InfoReader).
type countingReader struct {
	io.ReadCloser
	n *atomic.Int64
}

func (r *countingReader) Read(p []byte) (int, error) {
	k, err := r.ReadCloser.Read(p)
	r.n.Add(int64(k))
	return k, err
}

// ObjectInfo implements storage.InfoReader.
func (r *countingReader) ObjectInfo() (storage.ObjectInfo, bool) {
	return storage.ReaderInfo(r.ReadCloser)
}

// simOpen is what opening a dataset on a fresh cache costs the store.
type simOpen struct {
	requests int
	bytes    int64 // 0: the index's size
	// stamp is the size of the ETag stream stores beside the cached
	// index (sim.Dataset.IndexStampBytes).
	stamp int64
}

// open is what stream.Open costs the store for the index on a fresh
// cache: the requests counted, and a Stat of an index.json used as read
// or selected from when its GET's response did not describe it (GCS; see
// stream's loadIndex); the bytes read.
func (b *countingBucket) open() simOpen {
	n := int(b.requests.Load())
	if b.indexRead.Load() && !b.scanned.Load() && !b.told.Load() {
		n++
	}
	return simOpen{requests: n, bytes: b.read.Load()}
}

// indexStamp returns the size of the stamp stream.Open stores beside the
// index.json it cached from b (sim.Dataset.IndexStampBytes): the store's
// ETag of it, as its GET's response told or, where that did not (GCS),
// as the Stat stream sends then says (that Stat is sent to plain, which
// counts nothing: open counts it). A tar dataset's index gets none, nor
// does a store without ETags; a failed Stat is the stream's best effort
// failing too.
func (b *countingBucket) indexStamp(ctx context.Context, plain storage.Bucket, size int64) int64 {
	if !b.indexRead.Load() || b.scanned.Load() {
		return 0
	}
	if p := b.etag.Load(); p != nil && b.told.Load() {
		return int64(len(*p))
	}
	info, err := plain.Stat(ctx, format.IndexFile)
	if err != nil || info.Size != size {
		return 0
	}
	return int64(len(info.ETag))
}
