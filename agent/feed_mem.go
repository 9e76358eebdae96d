package agent

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/sluicedata/sluice/agentapi"
)

// The feed's memory: the slots batches are written into, the arena of
// records copied out of their shards under a cache limit, and the reads
// that fill them.

// feedSlot is a reusable memory file of an iteration, mapped here.
type feedSlot struct {
	id   int
	fd   int
	mem  []byte
	busy bool // written and not yet freed by the client
	sent bool // the client has its descriptor
}

// maxFeedSlots bounds the memory files one iteration keeps: enough for the
// batches a client holds (its queue, the one training, the one being
// read); when all are busy a batch goes into a file used once.
const maxFeedSlots = 8

// minFeedSlot is the smallest slot file, so that small batches that grow
// a little do not retire their slots.
const minFeedSlot = 1 << 20

func (sl *feedSlot) close() {
	if sl.mem != nil {
		unix.Munmap(sl.mem)
		sl.mem = nil
	}
	if sl.fd > 0 {
		unix.Close(sl.fd)
		sl.fd = 0
	}
}

// free marks the slots the client freed as writable again.
func (fi *feedIter) free(ids []int) {
	for _, id := range ids {
		for _, sl := range fi.slots {
			if sl.id == id {
				sl.busy = false
			}
		}
	}
}

// slotFor returns a free slot of at least size bytes, creating or
// replacing one as needed; nil when all are busy.
func (fi *feedIter) slotFor(size int64) (*feedSlot, error) {
	var small *feedSlot
	for _, sl := range fi.slots {
		if sl.busy {
			continue
		}
		if int64(len(sl.mem)) >= size {
			return sl, nil
		}
		small = sl
	}
	if small == nil && len(fi.slots) >= maxFeedSlots {
		return nil, nil
	}
	if small != nil {
		// Too small for this batch: retire it, the client unmaps it.
		fi.retired = append(fi.retired, small.id)
		small.close()
		fi.slots = slices.DeleteFunc(fi.slots, func(s *feedSlot) bool { return s == small })
	}
	n := int64(minFeedSlot)
	for n < size {
		n *= 2
	}
	fd, err := unix.MemfdCreate("sluice-feed", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("agent: feed: memfd_create: %w", err)
	}
	if err := unix.Ftruncate(fd, n); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("agent: feed: size a memory file to %d bytes: %w", n, err)
	}
	mem, err := unix.Mmap(fd, 0, int(n), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("agent: feed: map a memory file of %d bytes: %w", n, err)
	}
	if fi.lastSlot == nil {
		fi.lastSlot = new(int)
	}
	*fi.lastSlot++
	sl := &feedSlot{id: *fi.lastSlot, fd: fd, mem: mem}
	fi.slots = append(fi.slots, sl)
	return sl, nil
}

// copyRecords reads the records of locs (the pending locations after
// those already copied) into the iteration's arena, appending to fi.recs,
// releases their leases (each location's release becomes a no-op) and
// closes the shard files: nothing of the shards is held once it returns.
// On error nothing was released.
func (fi *feedIter) copyRecords(locs []location) error {
	var need, have, copied int64
	for _, l := range locs {
		need += l.length
		if l.rec != nil {
			copied += l.length
		}
	}
	for _, r := range fi.recs {
		have += int64(len(r))
	}
	if have+need > agentapi.MaxFeedBatch {
		return fmt.Errorf("%w: feed batch holds more than %d bytes", agentapi.ErrInvalid, int64(agentapi.MaxFeedBatch))
	}
	if read := need - copied; int64(cap(fi.held)-len(fi.held)) < read {
		// A new arena; the records already copied keep the old one alive.
		fi.held = make([]byte, 0, max(2*int64(cap(fi.held)), read))
	}
	if fi.files == nil {
		fi.files = map[string]*os.File{}
	}
	recs := make([][]byte, len(locs))
	for i, l := range locs {
		if l.rec != nil {
			recs[i] = l.rec // copied by the producer, no lease
			continue
		}
		f, ok := fi.files[l.path]
		if !ok {
			var err error
			if f, err = os.Open(l.path); err != nil {
				fi.closeFiles(nil)
				return fmt.Errorf("agent: feed: read sample %d: %w", l.sample, err)
			}
			fi.files[l.path] = f
		}
		start := len(fi.held)
		rec := fi.held[start : start+int(l.length) : start+int(l.length)]
		if err := readFull(f, rec, l.offset); err != nil {
			fi.closeFiles(nil)
			return fmt.Errorf("agent: feed: read sample %d from %s: %w", l.sample, l.path, err)
		}
		fi.held = fi.held[:start+int(l.length)]
		recs[i] = rec
	}
	// An evicted shard's blocks stay allocated while a descriptor is open.
	fi.closeFiles(nil)
	for i := range locs {
		locs[i].release()
		locs[i].release = func() {}
	}
	fi.recs = append(fi.recs, recs...)
	return nil
}

// feedSrc is where a value read straight into the batch lies in its shard.
type feedSrc struct {
	f   *os.File
	off int64
}

// directMin is the record size from which its values of directValue bytes
// or more are read from the shard straight into the batch's memory: one
// copy instead of two, for one more read (measured on a 25 KB value's
// record, 2 cores at load ~10: 13.0 against 15.0 agent CPU us per sample
// at batch 32, 17.0 against 18.0 at 256; read calls are costly here).
const directMin = 16 << 10

// directValue is the smallest value read straight into the batch.
const directValue = 8 << 10

// directPrefix is how many bytes past a large record's column lengths are
// read with them: the small columns that lead the record, usually.
const directPrefix = 512

// readLarge reads a large record (directMin bytes or more) of a batch into
// vals, its columns' values: the column lengths and the first bytes in one
// read, each run of small columns after a large value in one more (into
// rec, the record's scratch), and each large value (directValue bytes or
// more, not transformed) only noted in srcs[at+k], to be read later
// straight into the batch's memory (fillFeed; vals[k] stands in for it
// with the right length). srcs is allocated with size entries when nil.
func (fi *feedIter) readLarge(p *feedSchema, f *os.File, l location, rec []byte, vals [][]byte, srcs []feedSrc, at, size int) ([]feedSrc, error) {
	pre := min(int64(4*p.nvar)+directPrefix, l.length)
	if err := readFull(f, rec[:pre], l.offset); err != nil {
		return srcs, fmt.Errorf("read: %w", err)
	}
	spans, err := p.spans(rec[:pre], l.length)
	if err != nil {
		return srcs, err
	}
	large := func(k int) bool { return spans[k][1] >= directValue && p.cols[k].transform == nil }
	for k := 0; k < len(spans); {
		if large(k) {
			n := spans[k][1]
			if int64(len(fi.hole)) < n {
				fi.hole = make([]byte, n)
			}
			vals[k] = fi.hole[:n:n]
			if srcs == nil {
				srcs = make([]feedSrc, size)
			}
			srcs[at+k] = feedSrc{f: f, off: l.offset + spans[k][0]}
			k++
			continue
		}
		// Columns k..j-1 lie back to back: one read for what is missing.
		j := k + 1
		for j < len(spans) && !large(j) {
			j++
		}
		a, b := max(spans[k][0], pre), spans[j-1][0]+spans[j-1][1]
		if b > a {
			if err := readFull(f, rec[a:b], l.offset+a); err != nil {
				return srcs, fmt.Errorf("read: %w", err)
			}
		}
		for ; k < j; k++ {
			sp := spans[k]
			vals[k] = rec[sp[0] : sp[0]+sp[1] : sp[0]+sp[1]]
		}
	}
	return srcs, nil
}

func readFull(f *os.File, b []byte, off int64) error {
	if _, err := f.ReadAt(b, off); err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%w: shard is shorter than its index says", agentapi.ErrCorrupt)
		}
		return err
	}
	return nil
}

// fillFeed writes the pieces into mem: from memory, or (the values srcs
// names) read from their shard files.
func fillFeed(mem []byte, pieces []feedPiece, srcs []feedSrc, ncol int) error {
	for _, pc := range pieces {
		dst := mem[pc.off : pc.off+int64(len(pc.b))]
		if pc.i >= 0 && srcs != nil {
			if s := srcs[pc.i*ncol+pc.k]; s.f != nil {
				if err := readFull(s.f, dst, s.off); err != nil {
					return fmt.Errorf("agent: feed: read %s: %w", s.f.Name(), err)
				}
				continue
			}
		}
		copy(dst, pc.b)
	}
	return nil
}

// writeMemfd creates an anonymous memory file of size bytes holding the
// pieces at their offsets (see fillFeed).
func writeMemfd(size int64, pieces []feedPiece, srcs []feedSrc, ncol int) (int, error) {
	fd, err := unix.MemfdCreate("sluice-feed", unix.MFD_CLOEXEC)
	if err != nil {
		return 0, fmt.Errorf("agent: feed: memfd_create: %w", err)
	}
	if err := unix.Ftruncate(fd, size); err != nil {
		unix.Close(fd)
		return 0, fmt.Errorf("agent: feed: size the batch's memory file to %d bytes: %w", size, err)
	}
	mem, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return 0, fmt.Errorf("agent: feed: map the batch's memory file: %w", err)
	}
	err = fillFeed(mem, pieces, srcs, ncol)
	unix.Munmap(mem)
	if err != nil {
		unix.Close(fd)
		return 0, err
	}
	return fd, nil
}
