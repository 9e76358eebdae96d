package stream

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"

	"github.com/sluicedata/sluice/cache"
	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/wds"
)

// tarSeqAhead is how many shards of its list a TarSeqIterator prefetches
// past the one it reads (fetches that do not fit under the cache limit are
// skipped; the read then waits for its shard).
const tarSeqAhead = 2

// TarSeqIterator reads one reader's shards of a TarSequence epoch, whole
// and in order, samples in archive order. It is not safe for concurrent
// use; run one per worker.
type TarSeqIterator struct {
	s            *TarSequence
	ctx          context.Context
	cancel       context.CancelFunc
	epoch        int64
	shape        TarSeqShape
	list         []int
	pos          atomic.Int64 // position in list of the shard being read
	skip         int          // samples to skip in the first shard (resume)
	lease        *cache.Lease
	f            *wds.File
	next         int // next sample of f
	j            int // current sample of f, -1 before the first
	n            int64
	err          error
	removeFuture func()
	closed       bool
}

// Iter returns reader sh's iterator over epoch from its start.
func (s *TarSequence) Iter(ctx context.Context, epoch int64, sh TarSeqShape) (*TarSeqIterator, error) {
	return s.iter(ctx, epoch, sh, 0, 0)
}

// Resume returns the iterator that continues where st was taken: the
// samples of st's epoch not yet delivered by that reader. sh must be the
// shape st was taken on (an error matching ErrTarSeqShape otherwise): the
// sequential order is a function of the shape, so it cannot move to
// another one.
func (s *TarSequence) Resume(ctx context.Context, st TarSeqState, sh TarSeqShape) (*TarSeqIterator, error) {
	sh, err := sh.norm()
	if err != nil {
		return nil, err
	}
	if st.Ranks != sh.Ranks || st.Workers != sh.Workers || st.Rank != sh.Rank || st.Worker != sh.Worker {
		return nil, fmt.Errorf("%w: state of rank %d of %d, worker %d of %d; this reader is rank %d of %d, worker %d of %d",
			ErrTarSeqShape, st.Rank, st.Ranks, st.Worker, st.Workers, sh.Rank, sh.Ranks, sh.Worker, sh.Workers)
	}
	if st.Shard < 0 || st.Sample < 0 {
		return nil, fmt.Errorf("stream: tar sequence state %+v: negative position", st)
	}
	return s.iter(ctx, st.Epoch, sh, st.Shard, st.Sample)
}

func (s *TarSequence) iter(ctx context.Context, epoch int64, sh TarSeqShape, pos, skip int) (*TarSeqIterator, error) {
	sh, err := sh.norm()
	if err != nil {
		return nil, err
	}
	if epoch < 0 {
		return nil, fmt.Errorf("stream: tar sequence: epoch %d < 0", epoch)
	}
	list, err := s.Shards(epoch, sh)
	if err != nil {
		return nil, err
	}
	if pos > len(list) {
		return nil, fmt.Errorf("stream: tar sequence state: shard position %d past the reader's %d shards", pos, len(list))
	}
	it := &TarSeqIterator{s: s, epoch: epoch, shape: sh, list: list, skip: skip, j: -1}
	it.ctx, it.cancel = context.WithCancel(ctx)
	it.pos.Store(int64(pos))
	if s.cache != nil {
		it.removeFuture = s.cache.AddFuture(it)
	}
	return it, nil
}

// Shards returns the global shard IDs this iterator reads, in order.
func (it *TarSeqIterator) Shards() []int { return append([]int(nil), it.list...) }

// Next advances to the next sample; false at the end or on an error (Err).
func (it *TarSeqIterator) Next() bool {
	if it.closed || it.err != nil {
		return false
	}
	for {
		if it.f == nil {
			if int(it.pos.Load()) >= len(it.list) {
				return false
			}
			if err := it.openShard(); err != nil {
				it.err = err
				return false
			}
		}
		if it.next < it.f.Len() {
			it.j = it.next
			it.next++
			it.n++
			return true
		}
		it.closeShard()
		it.pos.Add(1)
	}
}

// openShard leases and opens the shard at pos and prefetches the next.
func (it *TarSeqIterator) openShard() error {
	pos := int(it.pos.Load())
	shard := it.list[pos]
	url := it.s.urls[shard]
	path := ""
	if it.s.cds != nil {
		l, err := it.s.cds.Acquire(it.ctx, shard)
		if err != nil {
			return fmt.Errorf("stream: tar shard %s: %w", url, err)
		}
		it.lease, path = l, l.Path(0)
		for k := 1; k <= tarSeqAhead && pos+k < len(it.list); k++ {
			it.s.cds.Prefetch(it.list[pos+k], int64(k))
		}
	} else {
		path = filepath.Join(it.s.root, filepath.FromSlash(it.s.keys[shard]))
	}
	f, err := it.s.tarIndex.open(path, nil)
	if err != nil {
		it.closeShard()
		var ce *wds.CorruptError
		if errors.As(err, &ce) {
			ce.Shard = url // the shard's URL, not its cache file
			return ce
		}
		return fmt.Errorf("stream: tar shard %s: %w", url, err)
	}
	if n := int64(len(f.Bytes())); n != it.s.sizes[shard] {
		f.Close()
		it.closeShard()
		return &wds.CorruptError{Shard: url, Offset: -1,
			Reason: fmt.Sprintf("file has %d bytes, it had %d when the dataset was opened", n, it.s.sizes[shard])}
	}
	it.f, it.next, it.j = f, 0, -1
	if it.skip > 0 {
		if it.skip > f.Len() {
			it.closeShard()
			return fmt.Errorf("stream: tar shard %s: the resume state skips %d samples of its %d: %w",
				url, it.skip, f.Len(), ErrIndexChanged)
		}
		it.next, it.skip = it.skip, 0
	}
	return nil
}

func (it *TarSeqIterator) closeShard() {
	if it.f != nil {
		it.f.Close()
		it.f = nil
	}
	if it.lease != nil {
		it.lease.Release()
		it.lease = nil
	}
	it.j = -1
}

// Sample returns the current sample as WebDataset yields it before
// decoding: __key__, __url__ and one []byte (a copy) per field.
func (it *TarSeqIterator) Sample() (format.Sample, error) {
	if it.f == nil || it.j < 0 {
		return nil, errors.New("stream: Sample called without a current sample")
	}
	s, err := it.f.Sample(it.j)
	if err != nil {
		return nil, withShardName(err, it.URL())
	}
	s[wds.URLField] = it.URL()
	return s, nil
}

// Record returns the current sample's tar bytes (its members' headers and
// data), a view valid until the next call to Next or Close.
func (it *TarSeqIterator) Record() []byte {
	if it.f == nil || it.j < 0 {
		return nil
	}
	rec, _ := it.f.Record(it.j)
	return rec
}

// Shard returns the current sample's global shard ID and index in it, or
// -1, -1 without a current sample.
func (it *TarSeqIterator) Shard() (shard, index int) {
	if it.f == nil || it.j < 0 {
		return -1, -1
	}
	return it.list[it.pos.Load()], it.j
}

// URL returns the current shard's URL (the samples' __url__).
func (it *TarSeqIterator) URL() string {
	if it.f == nil {
		return ""
	}
	return it.s.urls[it.list[it.pos.Load()]]
}

// Yielded returns the number of samples delivered so far by this iterator.
func (it *TarSeqIterator) Yielded() int64 { return it.n }

// State returns where the reader stands after the samples delivered so
// far; Resume continues from it.
func (it *TarSeqIterator) State() TarSeqState {
	st := TarSeqState{Epoch: it.epoch, Ranks: it.shape.Ranks, Workers: it.shape.Workers,
		Rank: it.shape.Rank, Worker: it.shape.Worker, Shard: int(it.pos.Load())}
	if it.f != nil {
		st.Sample = it.next
	} else {
		st.Sample = it.skip
	}
	return st
}

// Err returns the error that stopped the iteration, if any.
func (it *TarSeqIterator) Err() error { return it.err }

// NextUses implements cache.Future: the shard being read, then the rest
// of the list, one unit of distance per shard.
func (it *TarSeqIterator) NextUses(fn func(d *cache.Dataset, shard int, distance int64)) {
	pos := int(it.pos.Load())
	for k := pos; k < len(it.list); k++ {
		fn(it.s.cds, it.list[k], int64(k-pos))
	}
}

// Close releases the current shard and stops the reader's prefetches
// from counting as planned.
func (it *TarSeqIterator) Close() error {
	if it.closed {
		return nil
	}
	it.closed = true
	it.cancel()
	if it.removeFuture != nil {
		it.removeFuture()
	}
	it.closeShard()
	return nil
}
