package cache

import (
	"context"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// behindWrites are the files being written by WriteFileBehind: until each
// is in place (synced and renamed), no fetch renames a shard file into
// place (see waitBehind), so a crash never leaves a final shard without
// the index it was fetched under.
type behindWrites struct {
	mu      sync.Mutex
	pending []*behindWrite
	// hold, when set (by tests only), is received from after each
	// write's reservation, before its bytes are written.
	hold chan struct{}
	// manifestHold, when set (by tests only), is received from before
	// each manifest's background write (see writeManifestBehind).
	manifestHold chan struct{}
	// fetching is closed (once made) when the Cache's first download
	// lets the writes behind begin (see firstDownload and
	// WriteFileBehind).
	fetching chan struct{}
	// delay, when set (by tests only), replaces behindDelay.
	delay time.Duration
}

// behindDelay is the longest a write behind in a cache without a limit
// waits for the Cache's first download (see firstDownload) before it
// reserves its room (see WriteFileBehind).
const behindDelay = 20 * time.Millisecond

// fetchChan returns the channel closed when the Cache's first download
// begins. Call under b.mu.
func (b *behindWrites) fetchChan() chan struct{} {
	if b.fetching == nil {
		b.fetching = make(chan struct{})
	}
	return b.fetching
}

// firstDownload lets the writes behind that wait for the Cache's first
// download begin (awaitFetch). A fetch calls it as its download begins,
// or, for a shard fetched in memory, once the download's bytes are in or
// it failed: such a shard is read early from memory, its commit (which
// waits for the writes behind) is off its reader's path, and its GET
// then has the machine without their file creations and syncs (on
// BenchmarkColdS3FirstSample the first shard's response headers came
// 2.1-2.5 ms after its request with the index's and the manifest's
// writes beside it, 0.9-1.8 ms without, 6 alternated rounds at load
// 6-8). Only its first call counts.
func (b *behindWrites) firstDownload() {
	b.mu.Lock()
	defer b.mu.Unlock()
	ch := b.fetchChan()
	select {
	case <-ch:
	default:
		close(ch)
	}
}

// awaitFetch waits until the Cache's first download lets the writes
// behind begin (firstDownload), ctx ends or behindDelay has passed,
// whichever is first.
func (b *behindWrites) awaitFetch(ctx context.Context) {
	b.mu.Lock()
	ch := b.fetchChan()
	delay := b.delay
	b.mu.Unlock()
	if delay <= 0 {
		delay = behindDelay
	}
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-ch:
	case <-ctx.Done():
	case <-t.C:
	}
}

// failed reports whether the last write of rel registered has failed.
func (b *behindWrites) failed(rel string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, bw := range b.pending {
		if bw.rel == rel && bw.failed() {
			return true
		}
	}
	return false
}

type behindWrite struct {
	rel  string
	dir  string // the absolute directory of rel: it holds the commits it gates
	done chan struct{}
	err  error // set before done is closed
}

// WriteFileBehind is WriteFile in two steps: it reserves the file's room
// (waiting for space as WriteFile does) and creates its temporary file,
// then returns, and the rest (write, sync, rename) runs in the background;
// wait returns its result once the file is in place (nil also when
// another process is writing it: ErrBusy). err is the reservation's
// error, which wait also returns. Meanwhile shards may be downloaded and
// read early (AcquireEarly), but no fetch of this Cache renames a file
// into place under rel's directory (a dataset's, for its index) before
// the write has ended, and none does at all after it (or its
// reservation) failed: a crash leaves the file's data and the shards in
// temporary files that a restart discards, never shards in place without
// the file (an index) they belong to, until a later WriteFileBehind of
// the same rel takes the failed one's place. Close waits for the
// background part, which nothing cuts short: with its room reserved
// before the caller fetches anything, it never waits for room that the
// caller's own shards hold.
//
// A caller that has the file's bytes in memory (a freshly downloaded
// index) thus starts its first shard's download without waiting for the
// disk to sync the index. In a cache without a limit, where no
// reservation waits for room, the reservation and the temporary file come
// in the background as well, once the Cache's first download has begun
// (or behindDelay has passed): err is then nil, and a failure to reserve
// or create the file comes from wait (and gates the commits) like a
// failed write.
func (c *Cache) WriteFileBehind(rel string, data []byte) (wait func() error, err error) {
	if err := checkRel(rel); err != nil {
		err = fmt.Errorf("cache %s: %w", c.dir, err)
		return func() error { return err }, err // gates nothing
	}
	bw, end, err := c.addBehind(rel, filepath.Join(c.dir, filepath.FromSlash(path.Dir(rel))))
	if err != nil {
		return func() error { return err }, err
	}
	wait = bw.wait
	hold := c.behind.hold
	if c.opts.Limit == 0 {
		// Without a limit the reservation waits for no room: it is made
		// in the background too, once the caller's first download lets
		// it (firstDownload: at most behindDelay later), so that its GET
		// does not wait for the file's reservation and temporary file
		// (0.1-0.45 ms between the index's GET and the first shard's,
		// traced on BenchmarkColdS3FirstSample). The commits are gated
		// from here on all the same. Not cut short by Close.
		go func() {
			defer c.wg.Done()
			c.behind.awaitFetch(c.bg)
			w, err := c.reserveFile(context.WithoutCancel(c.bg), rel, int64(len(data)))
			if err != nil {
				end(err)
				return
			}
			if hold != nil {
				<-hold
			}
			end(w.write(c.bg, data))
		}()
		return wait, nil
	}
	w, err := c.reserveFile(c.bg, rel, int64(len(data)))
	if err != nil {
		defer c.wg.Done()
		end(err)
		return wait, bw.err
	}
	go func() {
		defer c.wg.Done()
		if hold != nil {
			<-hold
		}
		end(w.write(c.bg, data))
	}()
	return wait, nil
}

// addBehind registers a background write of rel that gates the commits
// under dir (see WriteFileBehind) and counts it in c.wg: end records its
// result, lets the commits through (or fails them) and marks it done; the
// caller calls c.wg.Done after end.
func (c *Cache) addBehind(rel, dir string) (bw *behindWrite, end func(error), err error) {
	bw = &behindWrite{rel: rel, dir: dir, done: make(chan struct{})}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, nil, ErrClosed
	}
	c.wg.Add(1)
	c.mu.Unlock()
	c.behind.mu.Lock()
	// An earlier failed write of rel is superseded: this one gates the
	// same commits in its place, and a retry that succeeds (an Open
	// downloading the index again) lets them through again.
	kept := c.behind.pending[:0]
	for _, p := range c.behind.pending {
		if p.rel == rel && p.err != nil {
			continue // failed and done: err is set before done is closed
		}
		kept = append(kept, p)
	}
	clear(c.behind.pending[len(kept):])
	c.behind.pending = append(kept, bw)
	c.behind.mu.Unlock()
	end = func(err error) {
		if errors.Is(err, ErrBusy) {
			err = nil // another process on the node is writing it
		}
		c.behind.mu.Lock()
		bw.err = err
		if err == nil {
			// Done: later commits need not look at it. A failed write
			// stays, and fails every later commit under its directory
			// until a later write of rel replaces it.
			for i, p := range c.behind.pending {
				if p == bw {
					c.behind.pending = append(c.behind.pending[:i], c.behind.pending[i+1:]...)
					break
				}
			}
		}
		close(bw.done)
		c.behind.mu.Unlock()
	}
	return bw, end, nil
}

// wait returns bw's result once it has ended.
func (bw *behindWrite) wait() error {
	<-bw.done
	return bw.err
}

// failed reports whether bw has ended with an error.
func (bw *behindWrite) failed() bool {
	select {
	case <-bw.done:
		return bw.err != nil
	default:
		return false
	}
}

// waitBehind waits until every WriteFileBehind write pending now in a
// directory holding file (an absolute path) has ended, and returns the
// first one's error.
func (c *Cache) waitBehind(ctx context.Context, file string) error {
	return c.behind.wait(ctx, func(bw *behindWrite) bool {
		rel, err := filepath.Rel(bw.dir, file)
		return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
	})
}

// wait waits until every write pending now that match selects has ended,
// and returns the first failed one's error.
func (b *behindWrites) wait(ctx context.Context, match func(*behindWrite) bool) error {
	b.mu.Lock()
	var pending []*behindWrite
	for _, bw := range b.pending {
		if match(bw) {
			pending = append(pending, bw)
		}
	}
	b.mu.Unlock()
	for _, bw := range pending {
		select {
		case <-bw.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		if bw.err != nil {
			return bw.err
		}
	}
	return nil
}

// WaitWrite waits until no WriteFileBehind write of rel is in progress in
// this process, and returns the error of a failed one: a second opener of
// the same dataset in this process finds the index in place rather than
// downloading it again while the first one's write syncs.
func (c *Cache) WaitWrite(ctx context.Context, rel string) error {
	return c.behind.wait(ctx, func(bw *behindWrite) bool { return bw.rel == rel })
}
