package agent

import (
	"errors"
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"

	"github.com/sluicedata/sluice/agentapi"
)

// pieceMin is the smallest inline record a reply sends from its own copy
// (one more buffer of the socket write's gather list); smaller ones are
// gathered into the connection's scratch buffer, where copying them costs
// less than another buffer.
const pieceMin = 4 << 10

// scratchKeep bounds the scratch buffer a connection keeps between
// replies: a larger one is dropped once written, not to pin it for small
// follow-ups.
const scratchKeep = 16 << 20

// reply builds a batch reply from locations. Copied records (read ahead
// under a cache limit) and inlined ones are sent in the reply, the latter
// read here and their leases dropped at once; the others stay leased under
// the batch ID until the client releases it. A shard whose samples are all
// sent inline is listed without a path, as get's. Records copied into a
// memory file (mapped, iteration_map.go) are listed with that file as
// their shard's path, beside the shard's own entry, and held under the
// batch ID as leased ones are.
//
// The reply's body is the entries (returned) followed by the inline area
// (c.tail): copies of pieceMin bytes or more are written from the copies
// themselves, the rest from the scratch buffer, so a copied record is
// copied once by the agent (from its shard, in the producer) and once by
// the kernel into the socket; once the reply is written, their blocks
// are done with them (c.written).
func (c *conn) reply(iter int, locs []location, done bool, inlineMax int) (any, []byte, error) {
	b := agentapi.Batch{Op: agentapi.OpBatch, N: len(locs), Done: done}
	// A shard's leased and inline records share its entry in Shards.
	// Records copied into a memory file are listed with that file, one
	// entry for the records of one layout (schema), whatever their shards:
	// a client reads a shard's entry with its layout, and an entry a
	// shard made a shuffled reply's header list nearly every record's
	// shard (40 of them a reply of 100 KB records).
	type shardKey struct {
		shard int // or, with mem, the layout
		mem   int
	}
	refs := map[shardKey]uint32{}
	body := make([]byte, 0, len(locs)*agentapi.EntrySize)
	// The scratch buffer holds the small inline records: sized first so
	// that the pieces sliced from it never move.
	var need int
	for _, l := range locs {
		if l.rec != nil && len(l.rec) < pieceMin || l.rec == nil && l.length <= int64(inlineMax) {
			need += int(l.length)
		}
	}
	if cap(c.scratch) < need || cap(c.scratch) > scratchKeep {
		c.scratch = make([]byte, 0, need)
	}
	scratch := c.scratch[:0]
	var tail [][]byte
	var inline uint64 // bytes of the inline area so far
	run := -1         // the piece of tail that ends at scratch's end, or -1
	// small adds scratch's last n bytes to the inline area, growing the
	// piece that ends there if the last one does.
	small := func(n int) {
		inline += uint64(n)
		end := len(scratch)
		if run >= 0 {
			tail[run] = scratch[end-n-len(tail[run]) : end : end]
			return
		}
		run = len(tail)
		tail = append(tail, scratch[end-n:end:end])
	}
	// own adds rec to the inline area as a piece of its own.
	own := func(rec []byte) {
		inline += uint64(len(rec))
		tail = append(tail, rec)
		run = -1
	}
	var copies []*copyBlock // the blocks of the copies sent, one for each
	var send *mapper        // the memory file whose descriptor the reply sends
	var kept []location
	var files map[string]*os.File
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	fail := func(i int, err error) (any, []byte, error) {
		releaseLocs(locs[i:])
		releaseLocs(kept)
		return nil, nil, err
	}
	for i, l := range locs {
		e := agentapi.Entry{Sample: l.sample, Length: uint32(l.length)}
		key := shardKey{shard: l.shard}
		if l.mem != nil && l.length > int64(inlineMax) {
			// Listed with the memory file (one inline is listed with
			// its shard).
			key.shard, key.mem = l.schema, l.mem.id
			if !l.mem.sent {
				send = l.mem
			}
		}
		ref, ok := refs[key]
		if !ok {
			ref = uint32(len(b.Shards))
			refs[key] = ref
			b.Shards = append(b.Shards, agentapi.BatchShard{Shard: l.shard, Size: l.size, Mem: key.mem})
		}
		switch {
		case l.rec != nil:
			if l.blk != nil {
				copies = append(copies, l.blk)
			}
			e.Ref, e.Offset = ref|agentapi.InlineFlag, inline
			if len(l.rec) >= pieceMin {
				own(l.rec)
			} else {
				scratch = append(scratch, l.rec...)
				small(len(l.rec))
			}
		case l.mem != nil && l.length <= int64(inlineMax):
			// A copy in the memory file, small enough to send inline:
			// read from the agent's mapping, and its block released.
			start := len(scratch)
			scratch = append(scratch, l.mem.mem[l.offset:l.offset+l.length]...)
			e.Ref, e.Offset = ref|agentapi.InlineFlag, inline
			small(len(scratch) - start)
			l.release()
		case l.length <= int64(inlineMax):
			if files == nil {
				files = map[string]*os.File{}
			}
			f, ok := files[l.path]
			if !ok {
				var err error
				if f, err = os.Open(l.path); err != nil {
					return fail(i, fmt.Errorf("agent: read sample %d: %w", l.sample, err))
				}
				files[l.path] = f
			}
			start := len(scratch)
			scratch = scratch[:start+int(l.length)]
			if _, err := f.ReadAt(scratch[start:], l.offset); err != nil {
				return fail(i, fmt.Errorf("agent: read sample %d from %s: %w", l.sample, l.path, err))
			}
			e.Ref, e.Offset = ref|agentapi.InlineFlag, inline
			small(int(l.length))
			l.release()
		default:
			b.Shards[ref].Path = l.path
			e.Ref, e.Offset = ref, uint64(l.offset)
			if kept == nil {
				kept = make([]location, 0, len(locs)-i)
			}
			kept = append(kept, l)
		}
		body = agentapi.AppendEntry(body, e)
	}
	c.tail, c.written = tail, copies
	if send != nil {
		send.sent = true
		b.MemFD = send.id
		c.sendMem = send
	}
	c.mu.Lock()
	if len(kept) > 0 {
		c.nextBatch++
		b.ID = c.nextBatch
		c.batches[b.ID] = &leased{iter: iter, locs: kept}
	}
	b.Unmap, c.unmap = c.unmap, nil
	c.mu.Unlock()
	c.a.mu.Lock()
	c.a.samples += int64(len(locs))
	c.a.mu.Unlock()
	return b, body, nil
}

// writeFD writes a reply, frame and then tail, with the descriptor fd
// attached to its first bytes (SCM_RIGHTS), which the client receives with
// them. fd stays open.
func (c *conn) writeFD(frame []byte, tail [][]byte, fd int) error {
	uc, ok := c.nc.(*net.UnixConn)
	if !ok {
		return errors.New("agent: mapped copies need a unix socket")
	}
	n, oobn, err := uc.WriteMsgUnix(frame, unix.UnixRights(fd), nil)
	if err != nil {
		return fmt.Errorf("agent: send a memory file: %w", err)
	}
	if oobn == 0 {
		return errors.New("agent: a memory file's descriptor was not sent")
	}
	bufs := make(net.Buffers, 0, 1+len(tail))
	if n < len(frame) {
		bufs = append(bufs, frame[n:])
	}
	bufs = append(bufs, tail...)
	if len(bufs) > 0 {
		_, err = bufs.WriteTo(c.nc)
	}
	return err
}

func releaseLocs(locs []location) {
	for _, l := range locs {
		l.release()
	}
}
