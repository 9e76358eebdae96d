package cache

import (
	"context"
	"fmt"
	"os"

	"github.com/sluicedata/sluice/storage"
)

// flight is one in-progress fetch shared by every caller in the process.
type flight struct {
	done   chan struct{}
	err    error
	demand bool // started by Acquire (may wait for space), not Prefetch
	// ready is closed when the shard's raw files are complete and
	// verified under their temporary paths (set before), while they are
	// still being synced and renamed. It is never closed when the fetch
	// writes only some of the files or fails before.
	ready chan struct{}
	paths []string
	// mem, set before ready for a shard fetched in memory, holds its
	// bytes; its temporary file is written after ready, and fileDone is
	// set (under Cache.mu) once it has been: until then the early leases
	// read mem, not the file.
	mem      *memShard
	fileDone bool
	// notify holds, under Cache.mu, the functions to call once ready or
	// done is closed, whichever first (see whenWritten).
	notify []func(error)
	// handedOff is set (under Cache.mu) once the leases of this flight
	// hold the shared lock of the renamed file: no early lease after that.
	handedOff bool

	// The fields below, guarded by Cache.mu, pin the shard for the callers
	// waiting for this flight (see Dataset.pin), so that none of them can
	// lose it to an eviction between the end of the fetch and its lease.
	//
	// waiters counts callers waiting for the flight that have not leased
	// the shard yet; pinned counts leases (refs) the flight took on their
	// behalf, each one claimed or given back by one waiter. sealed is set
	// once the flight has pinned: later callers lease directly (from hold
	// when nobody else holds the shard). hold is the shard's first raw
	// file with a shared lock, kept by the flight until it ends.
	waiters, pinned int
	sealed          bool
	hold            *os.File
}

// pin ends flight fl's work on shard, which it has just made complete (or
// found complete): it opens the shard with a shared lock and takes a lease
// on behalf of every caller waiting for fl, so that nothing (in this
// process or another) can evict the shard before they have it. Callers
// that come later lease it directly (see await). The flight calls pin
// while it still holds the shard's fetch lock where it has it, so no other
// process can evict the shard in between either. A shard that is gone (a
// flight that waited for another process's fetch can find it evicted
// already) pins nothing: its waiters look again.
func (d *Dataset) pin(ctx context.Context, shard int, fl *flight) {
	if fl == nil {
		return
	}
	c := d.c
	c.mu.Lock()
	sealed := fl.sealed
	c.mu.Unlock()
	if sealed {
		return
	}
	if h := c.beforePin; h != nil {
		h(shard)
	}
	// Never waits: with the fetch lock held nobody holds the file
	// exclusively; otherwise the waiters look again (and wait) themselves.
	f, err := d.openLeased(ctx, shard, false)
	if err != nil {
		f = nil // the waiters look again and meet the error themselves
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if fl.sealed {
		if f != nil {
			f.Close()
		}
		return
	}
	fl.sealed = true
	st := &d.st[shard]
	if fl.waiters > 0 && (st.refs > 0 || f != nil) {
		if st.refs == 0 {
			// The waiters' leases hold the file just opened. (This once
			// kept the file without counting the waiters' leases: they
			// looked again and leased it anew, and its shared lock stayed
			// until the garbage collector closed it, so a restart's size
			// check could not remove the shard.)
			st.f, f = f, nil
			st.early = false
		}
		st.refs += fl.waiters
		fl.pinned += fl.waiters
		fl.waiters = 0
	}
	fl.hold = f
}

// Prefetch fetches shard in the background if it is not local, without
// leasing it. distance is how many samples ahead of its consumer the shard
// is needed; the fetch evicts only shards needed later than that, and
// fails with ErrNoSpace instead of waiting when there is no such room.
// The returned channel is closed when the fetch ends; the error, if any,
// is then available from the returned func.
func (d *Dataset) Prefetch(shard int, distance int64) (done <-chan struct{}, err func() error) {
	return d.prefetch(shard, distance, nil)
}

// prefetch is Prefetch; the fetch downloads through via (nil: the
// Source's Bucket).
func (d *Dataset) prefetch(shard int, distance int64, via storage.Bucket) (done <-chan struct{}, err func() error) {
	if shard < 0 || shard >= len(d.st) {
		ch := make(chan struct{})
		close(ch)
		e := fmt.Errorf("cache %s: shard %d out of range [0, %d)", d.dir, shard, len(d.st))
		return ch, func() error { return e }
	}
	fl := d.start(shard, max(distance, 1), false, via)
	return fl.done, func() error { return fl.err }
}

// Present reports whether shard's raw files are all in the directory. It
// is a snapshot: another process may evict the shard right after.
func (d *Dataset) Present(shard int) bool {
	for _, f := range d.src.Shards[shard].Files {
		fi, err := os.Stat(d.path(f.Raw))
		if err != nil || fi.Size() != f.RawBytes {
			return false
		}
	}
	return true
}

// Coming reports whether shard's raw files are all in the directory or
// a fetch of it in this process has been admitted (its room reserved, or
// another process's fetch found): whether it is there yet is a matter of
// timing. Like Present, it is a snapshot.
func (d *Dataset) Coming(shard int) bool {
	c := d.c
	c.mu.Lock()
	st := &d.st[shard]
	// A shard held idle, or leased on its file in place (opened there
	// with its lock, not under the fetch's temporary name), in this
	// process is present, and stays so: no stat needed.
	here := st.flight != nil || st.idle != nil || (st.refs > 0 && st.f != nil && !st.early && !st.temp)
	c.mu.Unlock()
	return here || d.Present(shard)
}

// Local reports whether a lease on shard would be granted now without a
// fetch or a wait: the shard is held in this process (leased on its file
// in place, or idle) or its files are present, and no fetch of it is in
// flight. A reader running ahead of its consumer asks it so as to go on
// only where it takes no room and waits for nothing (the agent's
// read-ahead under a limit). Like Present, it is a snapshot: another
// process may evict the shard right after, and a lease then fetches it.
func (d *Dataset) Local(shard int) bool {
	if shard < 0 || shard >= len(d.st) {
		return false
	}
	c := d.c
	c.mu.Lock()
	st := &d.st[shard]
	flying := st.flight != nil
	held := st.idle != nil || (st.refs > 0 && st.f != nil && !st.early && !st.temp)
	c.mu.Unlock()
	if flying {
		return false
	}
	return held || d.Present(shard)
}

// start joins the shard's in-process flight or starts one, downloading
// through via (nil: the Source's Bucket).
func (d *Dataset) start(shard int, distance int64, demand bool, via storage.Bucket) *flight {
	c := d.c
	c.mu.Lock()
	st := &d.st[shard]
	if st.flight != nil {
		fl := st.flight
		c.mu.Unlock()
		return fl
	}
	fl := &flight{done: make(chan struct{}), demand: demand, ready: make(chan struct{})}
	if c.closed {
		fl.err = ErrClosed
		close(fl.done)
		c.mu.Unlock()
		return fl
	}
	st.flight = fl
	c.wg.Add(1)
	c.mu.Unlock()
	// Under a limit the admission begins here, on the caller's goroutine:
	// a prefetch is reserved or refused for room before its caller asks
	// for the next one, in the order of the calls (see admission). Nothing
	// here waits: not for another process's fetch lock, nor for room.
	//
	// Without a limit nothing is refused, so what is admitted does not
	// depend on the order: the whole admission runs on the flight's
	// goroutine (fetch), and the caller, a prefetch walk admitting the
	// next fetches one after the other, does not wait for any of it. An
	// admission creates the shard's lock file (an inode: 0.1-0.4 ms, and
	// up to 8-18 ms beside other shards' direct writes and syncs, traced
	// on BenchmarkColdS3 at load 5-10), and while the walk waited for one
	// no later download began.
	a := &admission{}
	if c.opts.Limit > 0 {
		if err := d.admit(c.bg, a, shard, distance, demand, false); err != nil {
			d.end(shard, fl, err)
			c.wg.Done()
			return fl
		}
	}
	go func() {
		defer c.wg.Done()
		ctx := c.bg
		if via != nil {
			ctx = context.WithValue(ctx, viaKey{}, via)
		}
		err := d.fetch(ctx, shard, distance, demand, fl, a, func(paths []string) {
			c.mu.Lock()
			fl.paths = paths
			close(fl.ready)
			fns := fl.takeNotify()
			c.mu.Unlock()
			for _, fn := range fns {
				fn(nil)
			}
		})
		if err == nil {
			d.pin(c.bg, shard, fl) // when fetch returned before its own pin
		}
		d.end(shard, fl, err)
	}()
	return fl
}

// end ends flight fl of shard with err: its waiters and whenWritten
// functions are released.
func (d *Dataset) end(shard int, fl *flight, err error) {
	c := d.c
	c.mu.Lock()
	d.st[shard].flight = nil
	d.st[shard].early = false
	if err == nil {
		d.sawOnDisk(shard)
	}
	fl.err = err
	if fl.hold != nil {
		fl.hold.Close() // before done: a lease's Release then frees the shard
		fl.hold = nil
	}
	close(fl.done)
	fns := fl.takeNotify()
	c.mu.Unlock()
	for _, fn := range fns {
		fn(err)
	}
	if h := c.afterFlight; h != nil {
		h(shard)
	}
	c.signal()
}
