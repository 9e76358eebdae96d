package agent

import (
	"context"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/sluicedata/sluice/stream"
)

// Mapped copies: read-ahead copies a client maps instead of reading them
// off the socket (agentapi.Next.MapCopies).
//
// A copied record sent inline crosses the socket: the kernel copies it
// into the socket and again into the client's buffer. With 100 KB
// records that was two thirds of what BenchmarkAgentWarmShuffled/100KB
// spent under a limit beyond the cached path (per sample: the producer's
// copy out of the shard ~18 µs, the socket's write ~11 µs and read ~12
// µs, against the cached client's one copy out of its mapping, ~23 µs
// cold). A client that asks for mapped copies gets them written into an
// anonymous memory file (memfd_create: it has no name, in /dev/shm or
// anywhere) whose descriptor travels to the client with the first reply
// that lists it (SCM_RIGHTS, as the feed's batches, feed.go). A reply
// lists the file as a shard's entry with the file's id on the connection
// (agentapi.BatchShard.Mem) instead of a path; the client maps the
// descriptor once and reads the records from the mapping, as it reads a
// leased record, and the socket carries only the entries. Nothing is
// named, so an agent or a client killed by SIGKILL leaves nothing behind:
// the kernel frees the file with its last descriptor and mapping.
//
// The copies go into one memory file an iteration keeps, cut in blocks
// that are reused: a block whose copies were all released (the client
// released the batches carrying them, or they were still buffered when
// the iteration ended) takes the next copies. So a copy's bytes are valid
// until its batch is released, as a leased record's shard is held until
// then, and a client that keeps a view of one past that must copy it
// first. One file, listed in every reply that carries copies, stays
// mapped in the client from one reply to the next and for the
// connection's next iterations: a file a block (unmapped by the client
// when a reply no longer listed it) cost the client's munmap and page
// faults again at every block, and files written once and dropped at
// release cost their pages' allocation and freeing (50 µs a 100 KB record
// for the write, 16 µs for the unmap: worse than the socket). A file's id
// is never reused on its connection; a file the agent drops while the
// connection lives is named in the next reply's Unmap, for the client to
// unmap.
//
// Local records: for a client that maps copies, the producer copies every
// record of a local shard into the file, not only those past the leased
// run, and leases a run only of a shard that is not local (fetched on
// demand, as before) or when no block is free. A leased run made each
// reply list a shard of its own, which the client mapped and unmapped at
// every reply of a shuffled epoch, and its record was read cold from the
// page cache; a copy costs the producer one copy (the leased record's
// read, moved) and the client a read from a warm mapping. With the buffer
// full (mapBudget) the producer waits for the client's take instead of
// leasing a run. (docs/feed.md, session 13, has the figures.)
//
// Bounds: an iteration's file holds mapLive blocks of mapChunk bytes (16
// MiB of memory, mapped here and in the client); when no block is free,
// and wherever the file cannot be created, the producer copies into its
// heap blocks as before (copyBlock) and the reply carries those inline.
// So a client that holds its batches and stops asking holds at most 16
// MiB of an iteration's memory, and no lease: a mapped copy holds none, as
// a heap copy holds none.
const (
	// mapChunk is the size of a block.
	mapChunk = 2 << 20
	// mapLive is the number of blocks of an iteration's file.
	mapLive = 8
	// mapSize is the size of an iteration's file.
	mapSize = mapLive * mapChunk
	// mapBudget bounds the bytes of copies an iteration buffers, and
	// those a reply carries, once they are mapped: a reply costs the
	// client a round trip, and the socket carries no copy, so replies
	// are larger than copyBudget's (~40 samples of 100 KB, not ~20).
	// The buffer's copies and a reply's fit in the file's blocks with
	// room for the producer's current block; a client that holds more
	// batches makes the producer copy into the heap, under copyBudget.
	mapBudget = 4 << 20
	// mapCopyMax is the largest record copied into the file (copyMax
	// bounds those copied into the heap and sent inline): without the
	// socket's two copies a 300 KB record costs the agent one copy and
	// the client one from a warm mapping, and a reply carries several of
	// them where a leased record of another shard makes a reply of its
	// own. At 1 MB the copies cost more than the round trips they save
	// (BenchmarkAgentWarmShuffled/1MB: 278-316 µs a sample mapped against
	// 238-276 leased, load 11-17), so those stay leased.
	mapCopyMax = 512 << 10
	// mapName names the memory files in /proc/<pid>/fd and maps (as
	// "/memfd:sluice-copies"); it is no path.
	mapName = "sluice-copies"
)

// mapBlock is a block of an iteration's memory file.
type mapBlock struct {
	base int          // its offset in the file
	mem  []byte       // its bytes, mapped here
	used int          // bytes written since it was last free; only the producer touches it
	refs atomic.Int32 // copies not released yet, and 1 while the producer writes to it
	free chan *mapBlock
}

// done drops one reference; the last makes the block free again.
func (b *mapBlock) done() {
	if b.refs.Add(-1) != 0 {
		return
	}
	select {
	case b.free <- b:
	default: // cannot happen: free has room for every block
	}
}

// mapper is an iteration's mapped copies: its producer writes them, and
// stop closes it once the producer has exited.
type mapper struct {
	id     int    // the file's id on its connection (agentapi.BatchShard.Mem), > 0
	fd     int    // the memory file; -1 once closed
	mem    []byte // the file, mapped here
	blocks int    // blocks handed out so far (at most mapLive)
	free   chan *mapBlock
	blk    *mapBlock // the block copies are written to now
	// off says the file could not be created: heap copies only. Set by
	// newMapper only, so read anywhere.
	off bool
	// sent says the client was sent the file's descriptor; only the
	// connection's serving goroutine touches it.
	sent bool
}

// newMapper makes the memory file id of a connection's mapped copies; one
// that could not be made is off (copies go to the heap).
func newMapper(id int) *mapper {
	m := &mapper{id: id, fd: -1, free: make(chan *mapBlock, mapLive)}
	fd, err := unix.MemfdCreate(mapName, unix.MFD_CLOEXEC)
	if err != nil {
		m.off = true
		return m
	}
	var mem []byte
	if err = unix.Ftruncate(fd, mapSize); err == nil {
		mem, err = unix.Mmap(fd, 0, mapSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	}
	if err != nil {
		unix.Close(fd)
		m.off = true
		return m
	}
	m.fd, m.mem = fd, mem
	return m
}

// unsent says the reply that was to carry m's descriptor was not sent
// (m nil: none was to): the next reply that lists m carries it.
func (m *mapper) unsent() {
	if m != nil {
		m.sent = false
	}
}

// pushMapped sends a copy of the current sample's record, rec, written
// into the iteration's memory file. ok false when it could not (the
// client does not map copies, rec is over mapCopyMax, the buffer holds
// mapBudget, or no block is free: the caller copies into the heap or
// leases instead); else sent false when the iteration ends.
func (p *producer) pushMapped(ctx context.Context, sit *stream.Iterator, shard int, rec []byte) (sent, ok bool) {
	m := p.it.mapped.Load()
	if m == nil || p.it.copied.Load()+int64(len(rec)) > mapBudget {
		return false, false
	}
	b := m.block(len(rec))
	if b == nil {
		return false, false
	}
	off := b.used
	b.used += copy(b.mem[off:], rec)
	b.refs.Add(1)
	l := location{sample: sit.ID(), shard: shard, schema: p.schema(shard), size: mapSize,
		offset: int64(b.base + off), length: int64(len(rec)), mem: m, release: b.done}
	p.it.copied.Add(int64(len(rec)))
	select {
	case p.it.ch <- l:
		p.pushed++
		p.it.wake(false)
		return true, true
	case <-ctx.Done():
		b.done()
		return false, true
	}
}

// block returns the block to write n bytes into: the current one, or a
// free one; nil when none is free.
func (m *mapper) block(n int) *mapBlock {
	if m.off || n > mapCopyMax {
		return nil
	}
	if b := m.blk; b != nil && mapChunk-b.used >= n {
		return b
	}
	m.drop()
	var b *mapBlock
	select {
	case b = <-m.free:
	default:
		if m.blocks >= mapLive {
			return nil
		}
		base := m.blocks * mapChunk
		b = &mapBlock{base: base, mem: m.mem[base : base+mapChunk : base+mapChunk], free: m.free}
		m.blocks++
	}
	b.used = 0
	b.refs.Store(1)
	m.blk = b
	return b
}

// drop gives up the producer's reference on its current block.
func (m *mapper) drop() {
	if m.blk != nil {
		m.blk.done()
		m.blk = nil
	}
}

// mapIdle bounds the memory files a connection keeps from ended
// iterations for its next ones: a worker's next epoch, or the training
// process's workers, reuse the file and its pages (a new file cost the
// agent and the client a page fault a page, about one a 100 KB sample
// over an epoch of 2,000).
const mapIdle = 2

// mapper returns a memory file for an iteration's mapped copies: one an
// ended iteration left, or a new one.
func (c *conn) mapper() *mapper {
	c.mu.Lock()
	if n := len(c.mappers); n > 0 {
		m := c.mappers[n-1]
		c.mappers = c.mappers[:n-1]
		c.mu.Unlock()
		return m
	}
	c.nextMem++
	id := c.nextMem
	c.mu.Unlock()
	return newMapper(id)
}

// putMapper keeps m, an ended iteration's (nil: none), for the next, or
// closes it; the client is told to unmap a closed one it was sent. Every
// copy written in it has been released, buffered or sent.
func (c *conn) putMapper(m *mapper) {
	if m == nil {
		return
	}
	m.reset()
	c.mu.Lock()
	if !m.off && len(c.mappers) < mapIdle {
		c.mappers = append(c.mappers, m)
		m = nil
	} else if m.sent {
		c.unmap = append(c.unmap, m.id)
	}
	c.mu.Unlock()
	if m != nil {
		m.close()
	}
}

// closeMappers closes the files kept for the next iterations.
func (c *conn) closeMappers() {
	c.mu.Lock()
	ms := c.mappers
	c.mappers = nil
	c.mu.Unlock()
	for _, m := range ms {
		m.close()
	}
}

// reset makes every block of m free for the next iteration. Blocks are
// made anew, with a new free list: a reference to an old one dropped late
// cannot hand its bytes to the next iteration twice.
func (m *mapper) reset() {
	m.blk = nil
	m.blocks = 0
	m.free = make(chan *mapBlock, mapLive)
}

// close unmaps and closes the file. The producer has exited; a copy still
// referenced (a batch the client has not released yet) stays readable
// through the client's mapping, which holds the file until it is unmapped.
func (m *mapper) close() {
	m.drop()
	if m.fd < 0 {
		return
	}
	unix.Munmap(m.mem)
	unix.Close(m.fd)
	m.mem, m.fd = nil, -1
}
