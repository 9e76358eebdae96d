package cache

import (
	"errors"
	"io/fs"
	"os"
)

// Creating a shard's fetch lock file allocates an inode, and on a busy
// ext4 waits for the journal beside other shards' syncs: median 0.06-0.25
// ms, and now and then 5-17 ms (traced on BenchmarkColdS3 at load 5-10).
// That creation is on the fetch's way to its GET; a prefetch walk that
// knows its next shards has their lock files created ahead, in the
// background (PrepareFetch), and their fetches open files that exist.
// Only the file is made: its flock, which is the fetch lock, is taken by
// the fetch as before, so nothing another process sees changes but the
// file's creation time (lock files are never deleted). Traced on
// BenchmarkColdS3 at 4 MB, with every lock file of the dataset created once
// the first shard was in (an experiment) against without, 16 passes each
// alternated at load 10-14: a fetch's start to its GET 0.07-0.34 ms
// median a pass against 0.17-2.05, GETs in flight in the middle of a pass
// median 7.44 against 6.79; with PrepareFetch from the walk the lock file
// is opened in 0.02-0.04 ms (median a pass) where it was created in
// 0.06-0.25.

// lockAheadQueue bounds the lock files waiting to be created ahead: a walk
// names a few shards past those it fetched (its fetch slots' worth), and
// names beyond the queue are dropped (their fetches create their files).
const lockAheadQueue = 64

// PrepareFetch creates shard's fetch lock file in the background if it is
// not there yet, so that a fetch of it soon after does not wait for the
// file's creation. It never blocks: the request is dropped when the
// Cache's queue is full or the Cache is closed, and a shard whose files
// are present, or that is being fetched in this process, is skipped.
func (d *Dataset) PrepareFetch(shard int) {
	if shard < 0 || shard >= len(d.st) || !d.remote {
		return
	}
	c := d.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || d.st[shard].flight != nil {
		return
	}
	if c.ahead == nil {
		c.ahead = make(chan lockAhead, lockAheadQueue)
		c.wg.Add(1)
		go c.createAhead(c.ahead)
	}
	select {
	case c.ahead <- lockAhead{d: d, shard: shard}:
	default: // full: the fetch creates it
	}
}

// lockAhead is one lock file to create ahead (PrepareFetch).
type lockAhead struct {
	d     *Dataset
	shard int
}

// createAhead creates the lock files queued on ch until the Cache closes.
func (c *Cache) createAhead(ch <-chan lockAhead) {
	defer c.wg.Done()
	for {
		select {
		case <-c.bg.Done():
			return
		case r := <-ch:
			r.d.createLockFile(r.shard)
		}
	}
}

// createLockFile creates shard's lock file unless it exists, or its
// shard's files are all present (its fetch, if any, opens it then).
// Errors are left to the fetch, which creates the file itself.
func (d *Dataset) createLockFile(shard int) {
	p := d.lockPath(shard)
	if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
		return
	}
	if d.Present(shard) {
		return
	}
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, d.c.opts.fileMode())
	if err == nil {
		f.Close()
	}
}
