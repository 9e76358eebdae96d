package cache

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// Idle holds.
//
// A shuffled epoch (py1e, MosaicML's default) interleaves the samples of a
// block's shards, so a reader changes shard at nearly every sample, and each
// change used to release one lease and take another: the last Release
// closed the shard's first raw file (dropping its shared flock), and the next
// Acquire opened, flocked and stat'ed it again (five system calls and a
// dozen allocations, 20× the cost of reading the sample from a mapping).
//
// So when the last lease of a shard in this process is released, the cache
// keeps its open, flock'ed file for a while: an idle hold. Taking the shard
// again within that time takes the hold back with one fstat (a file deleted
// by hand since, which MosaicML allows between epochs, has no link left:
// the hold ends and the shard is looked for anew), and the
// lease reads the same open file (Lease.FileID is unchanged), which no
// process can have evicted or replaced meanwhile.
//
// What each process may evict is unchanged in this process: an idle hold
// is not a lease (its shard is a candidate as before, chosen by the same
// policy), and this process's eviction ends the hold before it locks the
// shard's file (see dropIdle). Another process sharing the directory finds
// the file locked, as it would find a leased one, and picks another victim;
// holds are therefore bounded in time (idleHoldTTL after the release) and in
// number (idleHoldMax, and a quarter of the process's file descriptors), so
// a shard this process no longer reads becomes evictable by the others
// within a second.
//
// The end of a hold calls the dataset's OnEvict functions: a reader that
// keeps the shard mapped with no lease (package stream's idle shards) closes
// it there, so that no mapping outlives the protection of the file it maps.

const (
	// idleHoldTTL is how long a shard stays held after its last lease in
	// this process is released (between half of it and all of it: holds
	// expire at the sweeper's ticks).
	idleHoldTTL = time.Second
	// idleHoldMax bounds the idle holds of a Cache (one open file each).
	idleHoldMax = 4096
)

// idleHold is this process's shared flock on the first raw file of a shard
// that no lease holds any more.
type idleHold struct {
	d     *Dataset
	shard int
	f     *os.File
	fid   uint64 // the lease FileID of f
	tick  uint64 // idleHolds.tick at the release
	// prev and next link the hold into idleHolds' list; next also links
	// spare nodes.
	prev, next *idleHold
}

// idleHolds are a Cache's idle holds, guarded by Cache.mu.
type idleHolds struct {
	head, tail *idleHold // most recently released first
	n          int
	spare      *idleHold // unused nodes, linked by next
	nspare     int
	// tick counts the sweeper's periods (ttl/2).
	tick uint64
	// ttl and max are idleHoldTTL and the bound on holds; max is zero (no
	// holds) until init. Tests set them lower.
	ttl time.Duration
	max int
	// running is set while the sweeper goroutine runs: always while
	// holds exist.
	running bool
	kick    chan struct{}
	// notes lists shards released with no hold whose OnEvict functions
	// the sweeper calls (a lease that read a fetch's temporary file).
	notes []idleHold
	// nextFID numbers the files leases read (see Lease.FileID).
	nextFID uint64
}

// initHolds sets the holds' bounds: idleHoldMax, or a quarter of the
// process's file descriptor limit where that is less.
func (c *Cache) initHolds() {
	h := &c.holds
	h.ttl = idleHoldTTL
	h.max = idleHoldMax
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err == nil && lim.Cur/4 < uint64(h.max) {
		h.max = int(lim.Cur / 4)
	}
	h.kick = make(chan struct{}, 1)
}

// fidLocked returns the FileID of the shard's open file st.f, numbering it
// the first time. Call under Cache.mu.
func (c *Cache) fidLocked(st *shardState) uint64 {
	if st.f == nil {
		return 0
	}
	if st.fidOf != st.f {
		c.holds.nextFID++
		st.fid, st.fidOf = c.holds.nextFID, st.f
	}
	return st.fid
}

// holdLocked keeps f, the first raw file of d's shard whose last lease was
// just released (open, with its shared flock), as an idle hold. It returns
// the file to close: f when it cannot be held, or the shard's previous hold
// when it had one. Call under Cache.mu.
func (c *Cache) holdLocked(d *Dataset, shard int, f *os.File) *os.File {
	h := &c.holds
	if c.closed || h.max <= 0 {
		return f
	}
	st := &d.st[shard]
	fid := st.fid
	if st.fidOf != f {
		h.nextFID++
		fid = h.nextFID
	}
	var old *os.File
	if n := st.idle; n != nil {
		old = n.f
		h.unlink(n)
		h.free(n)
	}
	n := h.spare
	if n != nil {
		h.spare, n.next = n.next, nil
		h.nspare--
	} else {
		n = &idleHold{}
	}
	n.d, n.shard, n.f, n.fid, n.tick = d, shard, f, fid, h.tick
	h.pushFront(n)
	st.idle = n
	if !h.running {
		h.running = true
		c.wg.Add(1)
		go c.sweepHolds()
	} else if h.n > h.max {
		h.wake()
	}
	return old
}

// unholdLocked makes the shard's idle hold its leases' file again: st.f
// is the held file, with the FileID it had. Call under Cache.mu, with
// st.refs == 0 and st.idle set.
func (c *Cache) unholdLocked(st *shardState) {
	n := st.idle
	st.idle = nil
	c.holds.unlink(n)
	st.f, st.fid, st.fidOf = n.f, n.fid, n.f
	c.holds.free(n)
}

// endHoldLocked ends the shard's idle hold now: the sweeper closes its
// file and calls the OnEvict functions. Call under Cache.mu.
func (c *Cache) endHoldLocked(st *shardState) {
	n := st.idle
	st.idle = nil
	h := &c.holds
	h.notes = append(h.notes, idleHold{d: n.d, shard: n.shard, f: n.f})
	h.unlink(n)
	h.free(n)
	c.sweepLocked()
}

// sweepLocked starts the sweeper, or wakes it. Call under Cache.mu.
func (c *Cache) sweepLocked() {
	h := &c.holds
	if !h.running {
		h.running = true
		c.wg.Add(1)
		go c.sweepHolds()
		return
	}
	h.wake()
}

// unlinked reports whether f's file has no name left (its link count is
// zero: deleted, or replaced by a rename): one fstat, no allocation.
func unlinked(f *os.File) bool {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return true
	}
	return st.Nlink == 0
}

// noteLocked asks the sweeper to call d's OnEvict functions with shard,
// released with no hold. Call under Cache.mu.
func (c *Cache) noteLocked(d *Dataset, shard int) {
	h := &c.holds
	if c.closed || h.max <= 0 || len(d.onEvict) == 0 {
		return
	}
	h.notes = append(h.notes, idleHold{d: d, shard: shard})
	c.sweepLocked()
}

// Holds reports whether this process still keeps other processes from
// evicting shard's file with FileID fid: a lease or the idle hold reads
// it. An OnEvict function may be called for a shard whose file is held
// again (it ended an earlier hold); a reader that keeps the file with
// FileID fid mapped checks here whether to drop it.
func (d *Dataset) Holds(shard int, fid uint64) bool {
	if fid == 0 || shard < 0 || shard >= len(d.st) {
		return false
	}
	d.c.mu.Lock()
	defer d.c.mu.Unlock()
	st := &d.st[shard]
	if st.idle != nil {
		return st.idle.fid == fid
	}
	return st.refs > 0 && st.f != nil && st.fidOf == st.f && st.fid == fid
}

// dropIdle ends this process's idle hold on shard, if it has one, and
// calls the OnEvict functions: this process's eviction of the shard must
// be able to lock its file. Call without Cache.mu.
func (d *Dataset) dropIdle(shard int) {
	c := d.c
	c.mu.Lock()
	n := d.st[shard].idle
	if n == nil {
		c.mu.Unlock()
		return
	}
	d.st[shard].idle = nil
	f := n.f
	c.holds.unlink(n)
	c.holds.free(n)
	c.mu.Unlock()
	f.Close()
	d.evicted(shard)
}

// sweepHolds ends the holds that expire (idle for the TTL) or exceed the
// bound, and calls OnEvict functions for the notes, until no hold is left
// or the Cache closes (then it ends them all).
func (c *Cache) sweepHolds() {
	defer c.wg.Done()
	period := max(c.holds.ttl/2, time.Millisecond)
	t := time.NewTimer(period)
	defer t.Stop()
	var ended []idleHold
	for {
		all, tick := false, false
		select {
		case <-c.bg.Done():
			all = true
		case <-t.C:
			tick = true
			t.Reset(period)
		case <-c.holds.kick:
		}
		c.mu.Lock()
		h := &c.holds
		if tick {
			h.tick++
		}
		ended = append(ended[:0], h.notes...)
		clear(h.notes)
		h.notes = h.notes[:0]
		for n := h.tail; n != nil && (all || h.n > h.max || h.tick-n.tick >= 2); n = h.tail {
			n.d.st[n.shard].idle = nil
			ended = append(ended, idleHold{d: n.d, shard: n.shard, f: n.f})
			h.unlink(n)
			h.free(n)
		}
		done := all || h.n == 0
		if done {
			h.running = false
		}
		c.mu.Unlock()
		for i := range ended {
			if ended[i].f != nil {
				ended[i].f.Close()
			}
		}
		for _, e := range ended {
			e.d.evicted(e.shard)
		}
		clear(ended)
		if done {
			return
		}
	}
}

// wake kicks the sweeper without blocking.
func (h *idleHolds) wake() {
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// pushFront adds n first in the list.
func (h *idleHolds) pushFront(n *idleHold) {
	n.prev, n.next = nil, h.head
	if h.head != nil {
		h.head.prev = n
	} else {
		h.tail = n
	}
	h.head = n
	h.n++
}

// unlink takes n out of the list.
func (h *idleHolds) unlink(n *idleHold) {
	if n.prev != nil {
		n.prev.next = n.next
	} else {
		h.head = n.next
	}
	if n.next != nil {
		n.next.prev = n.prev
	} else {
		h.tail = n.prev
	}
	n.prev, n.next = nil, nil
	h.n--
}

// free keeps n, unlinked, for the next hold (as many as there are holds
// allowed, at most).
func (h *idleHolds) free(n *idleHold) {
	*n = idleHold{}
	if h.nspare >= h.max {
		return
	}
	n.next = h.spare
	h.spare = n
	h.nspare++
}
