package agent

import (
	"context"
	"sync/atomic"

	"github.com/sluicedata/sluice/stream"
)

// Read-ahead under a cache limit.
//
// A buffered location holds its shard's lease until the client releases
// the batch that carries it, and every lease keeps a shard from eviction.
// Under a limit an iteration therefore keeps leased, in its buffer, at most
// ahead runs of samples of one shard that the client has not finished
// taking (servedShards in begin counts them): leases that ran far ahead on
// every worker filled the limit, and another worker's next shard found no
// room (sizing the bound to the room the limit leaves stalled workers of
// other iterations on the same cache).
//
// A shuffled epoch changes shard at nearly every sample, so that bound
// alone made a reply of about one sample, each costing the client a round
// trip. Past the bound the producer reads on only where the next sample's
// shard is local (stream.Iterator.NextLocal: open, held or present, no
// fetch in flight), so running ahead never downloads a shard nor waits for
// room; it copies the records it reads there (the stream holds a shard's
// lease only while it reads it, as its current shard) and buffers the
// copies, which hold no lease, up to copyBudget bytes. A reply then
// carries many samples, the copied ones inline, and what a client holds
// leased is at most what it held before. Where the next shard is not
// local the producer waits, as before, for the client to take the leased
// run; then that shard is the client's next, fetched on demand.
//
// Who waits on whom: the producer waits for the client's takes (the taken
// signal) or the iteration's end (ctx), never for room on behalf of
// samples the client has not asked for beyond the one leased run; a take
// waits at most its request's wait for the producer. Demand fetches wait
// for room only against leases of runs clients were sent or are about to
// be sent, which they release as they read. A copy holds no lease at any
// time: the shard it was read from is leased only while the stream reads
// it (its current shard, which a shard present needs no room for), so a
// client that stops asking holds up no one's fetch with its buffered
// copies, however large.
//
// Copies cost memory bandwidth (the producer's copy, the socket's two),
// where a leased record is read by the client from its mapping: with 100
// KB records, BenchmarkAgentWarmShuffled/100KB/limited spends about 2.5x
// /cached's CPU a sample (it spent 3.8x serving one sample a reply). So a
// reply writes the copies straight from the blocks they were cut from
// (conn_reply.go: one gathered write, no copy into the reply), and blocks
// whose copies were written are reused, not allocated again.
const (
	// copyBudget bounds the bytes of copied records an iteration keeps in
	// its buffer, and those one reply carries (plus one record).
	copyBudget = 2 << 20
	// copyMax is the largest record copied; a larger one waits for the
	// leased bound as before. Through a DataLoader with 2 workers under a
	// limit (load 15-23), copying took the CPU a sample from 378-484 to
	// 368-382 µs at 100 KB and from 256-312 to 60-77 µs at 16 KB, but
	// left it as it was at 240 KB (744-1,124 against 750-881 µs: the
	// agent's copies cost what the client's round trips saved). It was
	// 16 KiB while the reply copied each record four more times, which
	// made copied 100 KB records 2x slower.
	copyMax = 128 << 10
	// copyChunk is the size of the blocks copies are cut from.
	copyChunk = 256 << 10
	// copyFree is how many blocks whose copies have all been written an
	// iteration keeps for its next copies: what its buffer and the reply
	// being written hold at most (a block allocated for each large record
	// cost its zeroing and the garbage collector's work, about a third of
	// the copy path's CPU with 100 KB records: 91-94 against 63-77 µs a
	// sample).
	copyFree = 2 * copyBudget / copyChunk
)

// copyBlock is a block the producer cuts copies from. It goes back to its
// iteration's free list once the producer has moved to another block and
// every copy cut from it was consumed (done: written in a reply, or into a
// feed batch's slot); a block with a copy consumed otherwise (a reply
// that failed, an iteration stopped) is left to the garbage collector.
type copyBlock struct {
	buf  []byte
	refs atomic.Int32 // copies not written yet, and 1 while the producer cuts from it
	free chan *copyBlock
}

// done drops one reference to b; the last returns b to the free list,
// if it has room.
func (b *copyBlock) done() {
	if b.refs.Add(-1) != 0 {
		return
	}
	b.buf = b.buf[:0]
	select {
	case b.free <- b:
	default:
	}
}

// producer is the state of an iteration's producer goroutine.
type producer struct {
	it      *iteration
	sizes   []int64
	schemas []int // each shard's record layout
	ahead   int
	copy    bool // read on past the leased run, copying (see above)
	// local says advance found the next sample local and the copies
	// room: it is copied into the memory file, if the client maps copies,
	// even where it could be leased (iteration_map.go, "Local records").
	local bool
	// run is the shard of the leased run being pushed: the last location
	// pushed was leased, of this shard. -1 when the last was a copy.
	run    int
	pushed int64      // locations sent to the buffer
	ends   []int64    // for each earlier leased run still in the buffer, pushed at its end
	blk    *copyBlock // the block copies are cut from
	free   chan *copyBlock
}

// noRelease is the release of a location that holds no lease.
func noRelease() {}

// advance waits until the producer may move to the next sample: without a
// limit at once; under one, once fewer than ahead earlier leased runs are
// untaken (Next may then fetch: the client's next shard), or, reading
// ahead, while the next sample is local and the copies leave room. A
// client that maps copies is sent a local shard's records as copies only
// (iteration_map.go, "Local records"): with the buffer full of them, the
// producer waits for a take rather than lease a run. False when ctx ended.
func (p *producer) advance(ctx context.Context, sit *stream.Iterator) bool {
	if p.ahead == 0 {
		return true
	}
	for {
		local := p.copy && sit.NextLocal()
		p.local = local && p.it.copied.Load() < p.it.budget()
		if p.local || p.untaken() < p.ahead && !(local && p.it.mapping()) {
			return true
		}
		if !p.stall(ctx) {
			return false
		}
	}
}

// stall waits for the client's next take, or the end of ctx (false). A
// take filling its reply (iteration.fill) is woken first: it waits for
// this producer only while the producer moves.
func (p *producer) stall(ctx context.Context) bool {
	p.it.stalled.Store(true)
	defer p.it.stalled.Store(false)
	p.it.wake(true)
	select {
	case <-p.it.taken:
		return true
	case <-ctx.Done():
		return false
	}
}

// untaken returns how many earlier leased runs are not taken yet: a run is
// taken once the takes that have returned reach its end (not while one
// drains the buffer: see iteration.takenN).
func (p *producer) untaken() int {
	taken := p.it.takenN.Load()
	for len(p.ends) > 0 && p.ends[0] <= taken {
		p.ends = p.ends[1:]
	}
	return len(p.ends)
}

// push sends the iterator's current sample to the buffer, leased or (past
// the leased bound, under a limit) copied. False when the iteration ends:
// its context ended or the location failed (it.err).
func (p *producer) push(ctx context.Context, sit *stream.Iterator) bool {
	shard, _ := sit.Shard()
	if p.ahead == 0 || shard == p.run {
		return p.pushLeased(ctx, sit, shard)
	}
	if p.run >= 0 {
		p.ends = append(p.ends, p.pushed)
		p.run = -1
	}
	rec := sit.Record()
	for {
		// A local shard's record is copied into the memory file rather
		// than leased (iteration_map.go, "Local records"); with the
		// buffer full, once the client took some.
		if p.local && p.it.mapping() && len(rec) <= mapCopyMax {
			if p.it.copied.Load()+int64(len(rec)) > mapBudget {
				if !p.stall(ctx) {
					return false
				}
				continue
			}
			if sent, ok := p.pushMapped(ctx, sit, shard, rec); ok {
				return sent
			}
		}
		if p.untaken() < p.ahead {
			p.run = shard
			return p.pushLeased(ctx, sit, shard)
		}
		if p.copy {
			if sent, ok := p.pushMapped(ctx, sit, shard, rec); ok {
				return sent
			}
			if copied := p.it.copied.Load() + int64(len(rec)); len(rec) <= copyMax && copied <= copyBudget {
				return p.pushCopy(ctx, sit, shard, rec)
			}
		}
		if !p.stall(ctx) {
			return false
		}
	}
}

// schema returns the record layout of shard's records, or, where it is
// not known, a key of shard's own (-1-shard).
func (p *producer) schema(shard int) int {
	if shard >= 0 && shard < len(p.schemas) {
		return p.schemas[shard]
	}
	return -1 - shard
}

func (p *producer) size(shard int) int64 {
	if shard >= 0 && shard < len(p.sizes) {
		return p.sizes[shard]
	}
	return 0
}

// pushLeased sends the current sample's location with its own lease.
func (p *producer) pushLeased(ctx context.Context, sit *stream.Iterator, shard int) bool {
	loc, err := sit.Location()
	if err != nil {
		p.it.err = err
		return false
	}
	l := location{sample: loc.Sample, shard: loc.Shard, path: loc.Path, size: p.size(shard),
		offset: loc.Offset, length: loc.Length, release: loc.Release}
	select {
	case p.it.ch <- l:
		p.pushed++
		p.it.wake(false)
		return true
	case <-ctx.Done():
		l.release()
		return false
	}
}

// pushCopy sends a copy of the current sample's record, rec.
func (p *producer) pushCopy(ctx context.Context, sit *stream.Iterator, shard int, rec []byte) bool {
	n := len(rec)
	b := p.block(n)
	start := len(b.buf)
	b.buf = append(b.buf, rec...)
	b.refs.Add(1)
	l := location{sample: sit.ID(), shard: shard, size: p.size(shard), length: int64(n),
		rec: b.buf[start : start+n : start+n], blk: b, release: noRelease}
	p.it.copied.Add(int64(n))
	select {
	case p.it.ch <- l:
		p.pushed++
		p.it.wake(false)
		return true
	case <-ctx.Done():
		b.done()
		return false
	}
}

// block returns a block with room for n bytes of copies: the current one,
// or one from the free list or new, becoming the current one. (Its buffer
// is never nil: an empty record's copy must still be a non-nil slice,
// which marks the location copied.)
func (p *producer) block(n int) *copyBlock {
	if b := p.blk; b != nil && cap(b.buf)-len(b.buf) >= n {
		return b
	}
	if p.blk != nil {
		p.blk.done() // the producer's reference
	}
	var b *copyBlock
	select {
	case b = <-p.free:
		if cap(b.buf) < n {
			b = nil
		}
	default:
	}
	if b == nil {
		b = &copyBlock{buf: make([]byte, 0, max(copyChunk, n)), free: p.free}
	}
	b.refs.Store(1)
	p.blk = b
	return b
}
