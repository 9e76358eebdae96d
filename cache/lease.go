package cache

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/sluicedata/sluice/storage"
)

// Lease keeps a shard's files in the cache until Release. Its methods are
// safe for concurrent use; Release must be called exactly once.
type Lease struct {
	d     *Dataset
	shard int
	hit   bool
	done  bool
	fl    *flight // the fetch whose temporary files the lease reads, if any
	mem   *memShard
	fid   uint64
}

// Hit reports whether the shard was already local when the lease was
// requested (no fetch was waited for).
func (l *Lease) Hit() bool { return l.hit }

// Shard returns the leased shard's ID.
func (l *Lease) Shard() int { return l.shard }

// Bytes returns the shard's first raw file held in memory, or nil when
// the lease reads it from the file (see Options.Memory). The bytes are
// complete and verified, read-only, and valid until Release; the file may
// not hold them yet (Committed waits for that).
func (l *Lease) Bytes() []byte {
	if l.mem == nil {
		return nil
	}
	return l.mem.buf
}

// Path returns the absolute path of the raw form of the shard's i-th file.
// The file exists there, complete, from Committed until Release.
func (l *Lease) Path(i int) string { return l.d.path(l.d.src.Shards[l.shard].Files[i].Raw) }

// ReadPath returns where the shard's i-th raw file can be read now: Path,
// or, for a lease granted while the fetch is still syncing and renaming
// the complete files, their temporary path. Open it at once: when opening
// it fails with fs.ErrNotExist, the file has been renamed meanwhile (the
// same complete bytes are at Path; Committed waits for that).
func (l *Lease) ReadPath(i int) string {
	if l.fl != nil {
		c := l.d.c
		c.mu.Lock()
		early := l.d.st[l.shard].early && l.d.st[l.shard].flight == l.fl &&
			(l.fl.mem == nil || l.fl.fileDone) // a shard fetched in memory: its file is written after
		c.mu.Unlock()
		if early {
			return l.fl.paths[i]
		}
	}
	return l.Path(i)
}

// Committed waits until the shard's files are in place under Path (they
// are, at once, for a lease not granted early) and returns the error
// that prevented it, if any: the lease's bytes stay readable through
// files opened before, but the shard is then not in the cache.
func (l *Lease) Committed(ctx context.Context) error {
	if l.fl == nil {
		return nil
	}
	select {
	case <-l.fl.done:
		return l.fl.err
	case <-ctx.Done():
		return fmt.Errorf("cache: waiting for %s to be committed: %w", l.d.where(l.d.src.Shards[l.shard].Files[0].Raw), ctx.Err())
	}
}

// FileID identifies the open file the lease reads through (File), zero
// when it has none (a shard fetched in memory). Two leases of a shard with
// the same non-zero FileID read one file that stayed open, with its lock,
// from the first lease to the second: no process can have evicted it or
// replaced it in between, so a mapping of it made under the first lease
// still maps the shard's file (see idlehold.go).
func (l *Lease) FileID() uint64 { return l.fid }

// File returns the first raw file, open read-only. It stays open at least
// until the last lease on the shard in this process is released; callers
// must not close it.
func (l *Lease) File() *os.File {
	l.d.c.mu.Lock()
	defer l.d.c.mu.Unlock()
	return l.d.st[l.shard].f
}

// Release gives the lease back. Calls after the first are no-ops.
func (l *Lease) Release() {
	c := l.d.c
	c.mu.Lock()
	if l.done {
		c.mu.Unlock()
		return
	}
	l.done = true
	st := &l.d.st[l.shard]
	st.refs--
	f, freed, temp := l.d.unrefLocked(l.shard)
	if l.mem != nil {
		c.doneLocked(l.mem, st.refs == 0)
	}
	if freed {
		c.signalLocked()
	}
	c.mu.Unlock()
	switch {
	case temp:
		l.d.holdTemp(l.shard, f)
	case f != nil:
		f.Close() // drops the shared flock
	}
}

// unrefLocked ends the leases' hold on shard once its last lease in this
// process is gone (refs == 0): its file becomes an idle hold, or is
// returned for the caller to close, or, with temp, to pass to holdTemp
// (the leases opened it under the fetch's temporary name). freed reports
// whether a file was held (the shard became evictable in this process:
// signal waiters for room). Call under Cache.mu.
func (d *Dataset) unrefLocked(shard int) (f *os.File, freed, temp bool) {
	st := &d.st[shard]
	if st.refs > 0 || st.f == nil {
		return nil, false, false
	}
	f, st.f = st.f, nil
	if st.early || st.temp {
		st.early, st.temp = false, false
		return f, true, true
	}
	return d.c.holdLocked(d, shard, f), true, false
}

// holdTemp keeps f, the shard's first raw file that its leases opened
// under the fetch's temporary name, as an idle hold if it is now the
// complete file in place and takes a shared lock (the fetch renamed it and
// ended); otherwise (the fetch still holds it, or failed) it closes f and
// tells the OnEvict functions, as a reader may keep it mapped. Once per
// fetched shard: three system calls. Call without Cache.mu.
func (d *Dataset) holdTemp(shard int, f *os.File) {
	files := d.src.Shards[shard].Files
	ok, err := tryLock(f, false)
	if err == nil && ok {
		var fi os.FileInfo
		fi, ok, err = sameFile(f, d.path(files[0].Raw))
		ok = ok && err == nil && fi.Size() == files[0].RawBytes
		for _, rf := range files[1:] {
			fi, err := os.Stat(d.path(rf.Raw))
			ok = ok && err == nil && fi.Size() == rf.RawBytes
		}
	}
	c := d.c
	c.mu.Lock()
	st := &d.st[shard]
	if ok && st.refs == 0 && st.f == nil && st.idle == nil {
		f = c.holdLocked(d, shard, f)
	} else {
		c.noteLocked(d, shard)
	}
	c.mu.Unlock()
	if f != nil {
		f.Close()
	}
}

// reviveLocked makes shard's idle hold, if it has one and no lease, the
// file of the leases to come, and reports whether it did. Call under
// Cache.mu.
func (d *Dataset) reviveLocked(shard int) bool {
	st := &d.st[shard]
	if st.refs > 0 || st.idle == nil {
		return false
	}
	if unlinked(st.idle.f) {
		// Deleted (or replaced) by hand since (MosaicML lets a user
		// remove a shard from local between epochs): the hold ends and
		// the caller looks for the shard anew.
		d.c.endHoldLocked(st)
		return false
	}
	d.c.unholdLocked(st)
	return true
}

// Acquire returns a lease on shard, fetching it first if it is not local.
// It waits for another goroutine's or process's fetch of the same shard
// rather than downloading it again, and for cache space when every
// candidate for eviction is in use, up to Options.WaitTimeout.
func (d *Dataset) Acquire(ctx context.Context, shard int) (*Lease, error) {
	l, err := d.AcquireEarly(ctx, shard)
	if err != nil {
		return nil, err
	}
	if err := l.Committed(ctx); err != nil {
		l.Release()
		return nil, err
	}
	return l, nil
}

// AcquireEarly is Acquire for a consumer that reads the shard's files
// through Lease.ReadPath or Lease.File: when it waits for a fetch, it
// returns as soon as every byte of the shard is written and verified in
// the fetch's temporary files, while they are still being synced and
// renamed into place (Lease.Committed waits for that). No reader ever sees
// a partial file, and a crash before the rename still leaves only
// temporary files, which a restart discards.
func (d *Dataset) AcquireEarly(ctx context.Context, shard int) (*Lease, error) {
	return d.acquireEarly(ctx, shard, nil)
}

// acquireEarly is AcquireEarly; a fetch it starts downloads through via
// (nil: the Source's Bucket).
func (d *Dataset) acquireEarly(ctx context.Context, shard int, via storage.Bucket) (*Lease, error) {
	if shard < 0 || shard >= len(d.st) {
		return nil, fmt.Errorf("cache %s: shard %d out of range [0, %d)", d.dir, shard, len(d.st))
	}
	c := d.c
	if l := d.leaseHeld(ctx, shard); l != nil {
		return l, nil
	}
	start := time.Now()
	missed := false
	defer func() {
		if missed {
			w := time.Since(start).Nanoseconds()
			c.stats.waitNanos.Add(w)
			d.stats.waitNanos.Add(w)
		}
	}()
	for attempt := 0; ; attempt++ {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, ErrClosed
		}
		st := &d.st[shard]
		if st.refs > 0 || d.reviveLocked(shard) {
			l := d.leaseLocked(shard, !missed)
			c.mu.Unlock()
			d.count(missed)
			admitted(ctx)
			return l, nil
		}
		fl := st.flight
		c.mu.Unlock()
		if fl != nil {
			missed = true
			l, err := d.await(ctx, shard, fl)
			if l != nil || err != nil {
				return l, err
			}
			continue // a failed prefetch: fetch on demand next
		}
		f, err := d.openLeased(ctx, shard, true)
		if err != nil {
			return nil, err
		}
		if f != nil {
			c.mu.Lock()
			st := &d.st[shard]
			if st.refs > 0 || d.reviveLocked(shard) {
				f.Close()
			} else {
				st.f = f
			}
			d.sawOnDisk(shard)
			st.refs++
			c.clock++
			st.lastUse = c.clock
			l := &Lease{d: d, shard: shard, hit: !missed, mem: d.readLocked(shard), fid: c.fidLocked(st)}
			c.mu.Unlock()
			d.count(missed)
			admitted(ctx)
			return l, nil
		}
		if attempt >= 8 {
			return nil, fmt.Errorf("cache: %s was evicted %d times before it could be leased; the cache limit is too low for this access pattern", d.where(d.src.Shards[shard].Files[0].Raw), attempt)
		}
		missed = true
		fl = d.start(shard, 0, true, via)
		if l, err := d.await(ctx, shard, fl); l != nil || err != nil {
			return l, err
		}
	}
}

// leaseHeld returns a lease on shard when this process leases it or holds
// it idle already (one fstat, see reviveLocked); nil otherwise.
func (d *Dataset) leaseHeld(ctx context.Context, shard int) *Lease {
	c := d.c
	c.mu.Lock()
	if c.closed || (d.st[shard].refs == 0 && !d.reviveLocked(shard)) {
		c.mu.Unlock()
		return nil
	}
	l := d.leaseLocked(shard, true)
	c.mu.Unlock()
	d.count(false)
	admitted(ctx)
	return l
}

// await waits for flight fl of shard. It returns an early lease when the
// flight's files become readable first (see AcquireEarly), the lease the
// flight pinned for this caller once the shard is complete, the flight's
// error when it was a demand fetch, and nil, nil when the caller should
// look again (the flight had ended, a prefetch failed, or the shard was
// gone when the flight ended: another process evicted it).
func (d *Dataset) await(ctx context.Context, shard int, fl *flight) (*Lease, error) {
	c := d.c
	c.mu.Lock()
	st := &d.st[shard]
	switch {
	case st.flight != fl:
		// Ended meanwhile (end closed done in the same hold that cleared
		// st.flight): its error when it was a demand fetch, as for a
		// waiter, else look again. Looking again after a failed demand
		// fetch (the caller's own, which can fail before the caller
		// waits: its admission runs on its goroutine without a limit)
		// fetched the shard a second time.
		c.mu.Unlock()
		return d.result(fl)
	case fl.sealed:
		// The flight has pinned the shard already: lease it directly.
		// (The file it holds was once made st.f without a lease counted
		// for it: the caller then waited for the flight's end and leased
		// the shard anew, leaving that file open and locked with no lease,
		// which kept this process's eviction from ever taking the shard.)
		if st.refs == 0 && !d.reviveLocked(shard) && fl.hold != nil {
			st.f, fl.hold = fl.hold, nil
		}
		if st.refs > 0 || st.f != nil {
			l := d.leaseLocked(shard, false)
			c.mu.Unlock()
			d.count(true)
			admitted(ctx)
			return l, nil
		}
		// Nothing to pin (the shard was gone): look again once it ends.
		c.mu.Unlock()
		select {
		case <-fl.done:
			return d.result(fl)
		case <-ctx.Done():
			return nil, d.waitErr(shard, ctx)
		}
	}
	fl.waiters++
	c.mu.Unlock()
	// The flight pins the shard for its waiters: the caller's claim is in.
	admitted(ctx)
	select {
	case <-fl.done:
	case <-fl.ready:
		l, err := d.leaseEarly(shard, fl)
		if l != nil {
			d.count(true)
			return l, nil
		}
		if err != nil {
			d.unwait(shard, fl)
			return nil, err
		}
		// Handed off or ended meanwhile: the flight pins the shard.
		select {
		case <-fl.done:
		case <-ctx.Done():
			d.unwait(shard, fl)
			return nil, d.waitErr(shard, ctx)
		}
	case <-ctx.Done():
		d.unwait(shard, fl)
		return nil, d.waitErr(shard, ctx)
	}
	c.mu.Lock()
	if fl.pinned > 0 {
		fl.pinned--
		c.clock++
		d.st[shard].lastUse = c.clock
		l := &Lease{d: d, shard: shard, mem: d.readLocked(shard), fid: c.fidLocked(&d.st[shard])}
		c.mu.Unlock()
		d.count(true)
		return l, nil
	}
	fl.waiters-- // not pinned: the flight failed or found no shard
	c.mu.Unlock()
	return d.result(fl)
}

// result is what await returns for an ended flight that pinned nothing.
func (d *Dataset) result(fl *flight) (*Lease, error) {
	if fl.err != nil && fl.demand {
		return nil, fl.err
	}
	return nil, nil
}

func (d *Dataset) waitErr(shard int, ctx context.Context) error {
	return fmt.Errorf("cache: waiting for %s: %w", d.where(d.src.Shards[shard].Files[0].Raw), ctx.Err())
}

// unwait withdraws a waiter of flight fl that gives up: it gives back the
// lease the flight pinned for it, if any.
func (d *Dataset) unwait(shard int, fl *flight) {
	c := d.c
	c.mu.Lock()
	if fl.pinned == 0 {
		fl.waiters--
		c.mu.Unlock()
		return
	}
	fl.pinned--
	d.st[shard].refs--
	f, freed, temp := d.unrefLocked(shard)
	if freed {
		c.signalLocked()
	}
	c.mu.Unlock()
	switch {
	case temp:
		d.holdTemp(shard, f)
	case f != nil:
		f.Close()
	}
}

// leaseLocked adds a lease on shard, which is leased already (refs > 0).
// Call under Cache.mu.
func (d *Dataset) leaseLocked(shard int, hit bool) *Lease {
	c := d.c
	st := &d.st[shard]
	st.refs++
	c.clock++
	st.lastUse = c.clock
	l := &Lease{d: d, shard: shard, hit: hit, mem: d.readLocked(shard), fid: c.fidLocked(st)}
	if st.early {
		l.fl = st.flight
	}
	return l
}

// leaseEarly leases shard on the complete temporary files of flight fl,
// which is syncing and renaming them. It returns nil when the flight has
// ended (or renamed the first file) meanwhile: the caller then leases the
// files in place. The flight keeps the shard from eviction until it hands
// the leases a shared lock on the renamed file.
func (d *Dataset) leaseEarly(shard int, fl *flight) (*Lease, error) {
	f, err := os.Open(fl.paths[0])
	if errors.Is(err, fs.ErrNotExist) {
		// Renamed meanwhile: until the hand-off, the flight still keeps
		// it from eviction under its final name.
		f, err = os.Open(d.path(d.src.Shards[shard].Files[0].Raw))
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("cache: open %s: %w", fl.paths[0], err)
	}
	c := d.c
	c.mu.Lock()
	st := &d.st[shard]
	if st.flight != fl || fl.handedOff || fl.sealed || c.closed {
		c.mu.Unlock()
		f.Close()
		return nil, nil
	}
	fl.waiters--
	if st.refs > 0 || d.reviveLocked(shard) {
		f.Close()
	} else {
		st.f = f
		st.early, st.temp = true, true
	}
	st.refs++
	c.clock++
	st.lastUse = c.clock
	l := &Lease{d: d, shard: shard, hit: false, mem: d.readLocked(shard), fid: c.fidLocked(st)}
	if st.early {
		l.fl = fl
	}
	c.mu.Unlock()
	return l, nil
}

func (d *Dataset) count(missed bool) {
	if missed {
		d.c.stats.misses.Add(1)
		d.stats.misses.Add(1)
	} else {
		d.c.stats.hits.Add(1)
		d.stats.hits.Add(1)
	}
}

// admittedKey carries, in an Acquire's context, the function to call once
// the caller's claim on the shard is in (see WithAdmitted).
type admittedKey struct{}

// WithAdmitted returns a context for Acquire (or AcquireEarly, or a Via's)
// that calls fn as soon as the caller's claim on the shard is in the
// cache's state: the shard leased, or the caller counted among the
// waiters of the fetch that will pin it for them (started by this call,
// or joined), before any wait for the download. A consumer whose shard
// changes are admitted in an Order ends its turn there, so that the next
// consumer's turn need not wait for this one's download. fn may be called
// more than once (an Acquire that looks again after a failed prefetch)
// and must not block.
func WithAdmitted(ctx context.Context, fn func()) context.Context {
	return context.WithValue(ctx, admittedKey{}, fn)
}

// admitted calls ctx's WithAdmitted function, if any.
func admitted(ctx context.Context) {
	if fn, ok := ctx.Value(admittedKey{}).(func()); ok {
		fn()
	}
}
