package cache

import (
	"context"
	"fmt"

	"github.com/sluicedata/sluice/storage"
)

// viaKey carries, in a fetch's context, the store it downloads through
// when that is not the Source's Bucket (see Via).
type viaKey struct{}

// Via is a view of a Dataset whose fetches download through another store
// than the Bucket the dataset was registered with: the same files, the
// same shared state (leases, fetches in flight, eviction), but another
// job's store and credentials. Several jobs on one node register one
// directory once; each reads it through its own Via, so a shard missing
// from the cache is downloaded with the credentials of the job that needs
// it, never with those of the job that registered the directory.
//
// A caller that joins a fetch another Via started waits for that fetch
// rather than downloading the shard again: a Via chooses the store of the
// downloads it starts, it does not authorise reads (the caller does that,
// by reading the dataset's index through its own store).
type Via struct {
	d *Dataset
	b storage.Bucket
}

// Via returns a view of d whose fetches download through b; a nil b means
// the Source's Bucket.
func (d *Dataset) Via(b storage.Bucket) Via { return Via{d: d, b: b} }

// Dataset returns the dataset the view reads.
func (v Via) Dataset() *Dataset { return v.d }

// Acquire is Dataset.Acquire, downloading through the view's store.
func (v Via) Acquire(ctx context.Context, shard int) (*Lease, error) {
	l, err := v.d.acquireEarly(ctx, shard, v.b)
	if err != nil {
		return nil, err
	}
	if err := l.Committed(ctx); err != nil {
		l.Release()
		return nil, err
	}
	return l, nil
}

// AcquireEarly is Dataset.AcquireEarly, downloading through the view's
// store.
func (v Via) AcquireEarly(ctx context.Context, shard int) (*Lease, error) {
	return v.d.acquireEarly(ctx, shard, v.b)
}

// Prefetch is Dataset.Prefetch, downloading through the view's store,
// except that done is closed as soon as the shard's bytes are all written
// and verified (readable through an early lease, see AcquireEarly), while
// the fetch may still be syncing and renaming its files; err then returns
// nil. A prefetcher that bounds the downloads it runs at once thus starts
// the next one without waiting for the disk to flush the last. A fetch
// that fails before its bytes are complete, or that ends without writing
// them all itself (another process's, or one joined midway), closes done
// when it ends, with its error.
func (v Via) Prefetch(shard int, distance int64) (done <-chan struct{}, err func() error) {
	if shard < 0 || shard >= len(v.d.st) {
		return v.d.prefetch(shard, distance, v.b)
	}
	return v.d.start(shard, max(distance, 1), false, v.b).written()
}

// PrefetchFunc is Prefetch reporting through fn instead of a channel: fn
// is called once, with nil as soon as the shard's bytes are all written
// and verified, or with the fetch's error (nil on success) when it ends
// without that. It is called on the fetch's goroutine (or at once, on
// the caller's, when that point is past already) and must not block. A
// prefetcher that frees a download slot in fn starts its next download
// without a goroutine of its own waking up in between.
func (v Via) PrefetchFunc(shard int, distance int64, fn func(error)) {
	if shard < 0 || shard >= len(v.d.st) {
		fn(fmt.Errorf("cache %s: shard %d out of range [0, %d)", v.d.dir, shard, len(v.d.st)))
		return
	}
	v.d.whenWritten(v.d.start(shard, max(distance, 1), false, v.b), fn)
}
