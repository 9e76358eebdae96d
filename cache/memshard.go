package cache

import (
	"errors"
	"fmt"
	"io"
	"os"
	"unsafe"
)

// A shard fetched in memory (see Options.Memory) is downloaded into one
// buffer, handed from there to the leases of this process, and written to
// its temporary file with direct I/O (bypassing the page cache: no copy
// into it and no writeback of it), then synced and renamed as any other.
// On a machine where client and server share the cores, the page cache's
// copy and writeback were a third of a cold download's CPU time.

// directAlign is the alignment of direct I/O: of the buffers' addresses
// and of the length of the part written directly (a whole page satisfies
// every Linux file system that takes O_DIRECT).
const directAlign = 4096

// memShard is a shard's raw bytes held in memory.
type memShard struct {
	buf []byte // the shard's bytes (len: its size), in an aligned block
	blk []byte // the whole block, counted in memPool.used
	// refs counts the leases reading buf; kept is set while the shard's
	// state holds it for the leases to come. The block is reused once
	// both are gone. Guarded by Cache.mu.
	refs int
	kept bool
	// flightRef is set while the fetch that made it writes buf to the
	// shard's file (one of refs).
	flightRef bool
	d         *Dataset
	// shard is the shard whose state keeps it.
	shard int
}

// memPool bounds the memory of the shards held in memory. Guarded by
// Cache.mu.
type memPool struct {
	limit int64
	used  int64       // bytes of every block: read, kept or free
	free  [][]byte    // blocks nobody reads, for reuse
	kept  []*memShard // the shards' states hold these, oldest first
}

// blocks holds the free blocks of closed Caches, for the next Cache of
// the process (a job that opens one dataset after another): see
// blockStash.
var blocks blockStash

// memGet returns an aligned block of at least n+1 bytes for a shard of n
// bytes (the extra byte notices an object longer than the index says), or
// nil when the Cache holds no shards in memory or its room is taken by
// shards being read: the shard is then fetched through its file. It
// reuses a free block where one fits: memory fresh from the kernel costs
// its zeroing and page faults, on this virtual machine 0.3-0.4 ms of CPU
// per MB, three times the copy into it. To make room it drops free
// blocks, then the oldest kept shards nobody reads (their next lease
// reads the file).
func (c *Cache) memGet(n int64) []byte {
	size := (n + 1 + directAlign - 1) &^ (directAlign - 1)
	c.mu.Lock()
	defer c.mu.Unlock()
	p := &c.mem
	if p.limit <= 0 || size > p.limit || c.closed {
		return nil
	}
	// A block at most an eighth larger is taken as it is: the shards of
	// a dataset have nearly equal sizes.
	fits := func(b []byte) bool { return int64(len(b)) >= size && int64(len(b)) <= size+size/8 }
	best := -1
	for i, b := range p.free {
		if fits(b) && (best < 0 || len(b) < len(p.free[best])) {
			best = i
		}
	}
	if best >= 0 {
		b := p.free[best]
		p.free = append(p.free[:best], p.free[best+1:]...)
		return b
	}
	for p.used+size > p.limit {
		if len(p.free) > 0 {
			p.used -= int64(len(p.free[0]))
			p.free = p.free[1:]
			continue
		}
		var m *memShard
		for _, k := range p.kept {
			if k.refs == 0 {
				m = k
				break
			}
		}
		if m == nil {
			return nil
		}
		c.unkeepLocked(m) // its block joins the free list
	}
	blk := blocks.take(fits, p.limit-p.used)
	if blk == nil {
		blk = alignedBlock(size)
	}
	p.used += int64(len(blk))
	return blk
}

// alignedBlock allocates size bytes at an address aligned to directAlign.
func alignedBlock(size int64) []byte {
	b := make([]byte, size+directAlign)
	off := int(uintptr(unsafe.Pointer(&b[0])) & (directAlign - 1))
	if off != 0 {
		off = directAlign - off
	}
	return b[off : off+int(size) : off+int(size)]
}

// memPut gives back a block that holds no shard (a failed download).
func (c *Cache) memPut(blk []byte) {
	c.mu.Lock()
	c.putLocked(blk)
	c.mu.Unlock()
}

// putLocked makes blk free for reuse (after Close: for the next Cache).
// Call under Cache.mu.
func (c *Cache) putLocked(blk []byte) {
	if c.closed {
		c.mem.used -= int64(len(blk))
		blocks.put(blk, c.mem.limit)
		return
	}
	c.mem.free = append(c.mem.free, blk)
}

// keepLocked makes m the in-memory copy of its shard, replacing any
// other. Call under Cache.mu.
func (c *Cache) keepLocked(m *memShard) {
	st := &m.d.st[m.shard]
	if old := st.mem; old != nil {
		c.unkeepLocked(old)
	}
	m.kept = true
	st.mem = m
	c.mem.kept = append(c.mem.kept, m)
}

// unkeepLocked drops m from its shard's state; its block is free once
// nobody reads it. Call under Cache.mu.
func (c *Cache) unkeepLocked(m *memShard) {
	if !m.kept {
		return
	}
	m.kept = false
	if st := &m.d.st[m.shard]; st.mem == m {
		st.mem = nil
	}
	for i, k := range c.mem.kept {
		if k == m {
			c.mem.kept = append(c.mem.kept[:i], c.mem.kept[i+1:]...)
			break
		}
	}
	c.freeLocked(m)
}

// readLocked adds a reader of shard's in-memory copy, if it has one, and
// returns it. Call under Cache.mu.
func (d *Dataset) readLocked(shard int) *memShard {
	m := d.st[shard].mem
	if m != nil {
		m.refs++
	}
	return m
}

// doneLocked removes a reader of m; the last one of a shard nobody else
// leases also drops it from the shard's state (a stream reads a shard
// once per epoch: what comes next is the file). Call under Cache.mu.
func (c *Cache) doneLocked(m *memShard, lastLease bool) {
	m.refs--
	if lastLease {
		c.unkeepLocked(m)
	}
	c.freeLocked(m)
}

// freeLocked gives m's block back once nobody reads or keeps it. Call
// under Cache.mu.
func (c *Cache) freeLocked(m *memShard) {
	if m.refs > 0 || m.kept || m.blk == nil {
		return
	}
	blk := m.blk
	m.blk, m.buf = nil, nil
	c.putLocked(blk)
}

// closeMemLocked drops every kept shard and free block at Close, for the
// next Cache (blocks being read follow at their last lease). Call under
// Cache.mu, with closed set.
func (c *Cache) closeMemLocked() {
	for len(c.mem.kept) > 0 {
		c.unkeepLocked(c.mem.kept[0])
	}
	for _, b := range c.mem.free {
		c.mem.used -= int64(len(b))
		blocks.put(b, c.mem.limit)
	}
	c.mem.free = nil
}

// writeFile writes buf to the part file p: the whole pages through direct
// I/O where the file system takes it, the rest (and everything where it
// does not) through p.f. It reports whether it wrote directly.
func (d *Dataset) writeFile(p *part, buf []byte) (direct bool, err error) {
	path := d.path(p.rel) + partSuffix
	whole := int64(len(buf)) &^ (directAlign - 1)
	if whole > 0 && !d.c.noDirect {
		direct, err = writeDirect(path, buf[:whole], d.c.directHook)
		if err != nil && !errors.Is(err, errNoDirect) {
			return false, fmt.Errorf("cache: write %s: %w", d.where(p.rel), err)
		}
	}
	from := int64(0)
	if direct {
		from = whole
	}
	if _, err := p.f.WriteAt(buf[from:], from); err != nil {
		return direct, fmt.Errorf("cache: write %s: %w", d.where(p.rel), err)
	}
	return direct, nil
}

// errNoDirect reports a file system (or platform) that does not take
// direct I/O; the caller writes through the page cache instead.
var errNoDirect = errors.New("direct I/O not supported")

// writeDirect writes b (whole pages, aligned) at offset 0 of the file at
// path, opened anew with direct I/O. hook, when set (by tests only),
// replaces the write.
func writeDirect(path string, b []byte, hook func(f *os.File, b []byte) error) (bool, error) {
	f, err := openDirect(path)
	if err != nil {
		return false, err
	}
	if hook != nil {
		err = hook(f, b)
	} else {
		_, err = f.WriteAt(b, 0)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if isNoDirect(err) {
		return false, errNoDirect
	}
	return err == nil, err
}

// blockWriter writes a download into a block.
type blockWriter []byte

func (w blockWriter) WriteAt(b []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(b)) > int64(len(w)) {
		return 0, fmt.Errorf("write of %d bytes at offset %d past the %d-byte block", len(b), off, len(w))
	}
	return copy(w[off:], b), nil
}

// fillChunk is the most fillBlock asks of one read.
const fillChunk = 128 << 10

// fillBlock reads r into b until r ends and returns the number of bytes
// read: len(b)+1 for a reader with more than b holds.
func fillBlock(b []byte, r io.Reader) (int64, error) {
	var got int
	for {
		if got == len(b) {
			// Full: one byte more says the object is longer (the caller
			// reports the count).
			var one [1]byte
			m, err := r.Read(one[:])
			if m > 0 || err == nil || err == io.EOF {
				return int64(got + m), nil
			}
			return int64(got), err
		}
		// A chunk at a time: the checksum that the store's reader
		// computes over each read then finds its bytes still in the
		// processor's cache (whole-block reads of several MB cost
		// 1.4-2 times the CPU in the copy and the checksum).
		m, err := r.Read(b[got:min(got+fillChunk, len(b))])
		got += m
		if err == io.EOF {
			return int64(got), nil
		}
		if err != nil {
			return int64(got), err
		}
	}
}

// keepFetched makes the size bytes downloaded into blk the in-memory copy
// of shard, read by flight fl (which writes them to the file) until
// fileWritten.
func (d *Dataset) keepFetched(shard int, fl *flight, blk []byte, size int64) *memShard {
	m := &memShard{buf: blk[:size], blk: blk, refs: 1, flightRef: true, d: d, shard: shard}
	c := d.c
	c.mu.Lock()
	c.keepLocked(m)
	fl.mem = m
	c.mu.Unlock()
	return m
}

// fileWritten records that flight fl has written m's bytes to its
// temporary file (or failed to): the file is readable early from then on,
// and the flight no longer reads m.
func (d *Dataset) fileWritten(fl *flight, m *memShard) {
	c := d.c
	c.mu.Lock()
	fl.fileDone = true
	if m.flightRef {
		m.flightRef = false
		c.doneLocked(m, false)
	}
	c.mu.Unlock()
}

// memFailed gives back the memory of a fetch that failed: blk when no
// shard was made of it yet, else m, which the leases already reading it
// keep until they are released (their bytes are complete and verified;
// the shard is just not in the cache).
func (d *Dataset) memFailed(blk []byte, m *memShard) {
	if m == nil {
		if blk != nil {
			d.c.memPut(blk)
		}
		return
	}
	c := d.c
	c.mu.Lock()
	if m.flightRef {
		m.flightRef = false
		m.refs--
	}
	c.unkeepLocked(m)
	c.freeLocked(m)
	c.mu.Unlock()
}
