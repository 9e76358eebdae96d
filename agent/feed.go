package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluicedata/sluice/agentapi"
	"github.com/sluicedata/sluice/plan"
)

// feedConn is a connection's feed state: the iterations that may be fed
// and the memory file of the reply being sent.
type feedConn struct {
	mu    sync.Mutex
	iters map[int]*feedIter
	// fd is the memory file to send with the next reply, or 0 for none.
	// Only the serving goroutine touches it.
	fd int
	// lastSlot numbers the slots of all the connection's iterations.
	lastSlot int
}

// feedIter is one iteration's feed: the samples taken for the batch being
// filled, the column plans and the files and buffers reused across
// batches. Only the serving goroutine uses it.
type feedIter struct {
	ds         *sharedDataset
	sample     FeedSample // Epoch and Seed of the iteration
	configured bool
	transforms map[string]ColumnTransform
	plans      map[int]*feedSchema
	pending    []location
	// copyOut: under a cache limit, the records of pending samples are
	// copied into held (recs[i] is pending[i]'s record) and their shard
	// leases released as soon as they are taken, so that a batch that
	// spans more shards than the limit leaves room for never pins them
	// all while it fills (the producer waits for room to fetch the next
	// one). Without a limit the batch reads its records straight from the
	// leased shards into its memory (one copy less).
	copyOut  bool
	recs     [][]byte
	held     []byte // the arena recs point into
	done     bool
	files    map[string]*os.File
	scratch  []byte
	meta     []byte
	hole     []byte // stands in for values read later (only its length counts)
	slots    []*feedSlot
	lastSlot *int // the connection's counter
	retired  []int
}

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

// feedBegun registers a begun iteration for feed requests.
func (c *conn) feedBegun(id int, ds *sharedDataset, spec plan.EpochSpec, limited bool) {
	c.feed.mu.Lock()
	defer c.feed.mu.Unlock()
	if c.feed.iters == nil {
		c.feed.iters = map[int]*feedIter{}
	}
	c.feed.iters[id] = &feedIter{ds: ds, sample: FeedSample{Epoch: spec.Epoch, Seed: seedOf(spec)}, lastSlot: &c.feed.lastSlot,
		copyOut: limited}
}

// feedEnd drops an iteration's feed state and its leases.
func (c *conn) feedEnd(id int) {
	c.feed.mu.Lock()
	fi := c.feed.iters[id]
	delete(c.feed.iters, id)
	c.feed.mu.Unlock()
	if fi != nil {
		fi.close()
	}
}

// feedEndAll drops every iteration's feed state.
func (c *conn) feedEndAll() {
	c.feed.mu.Lock()
	iters := c.feed.iters
	c.feed.iters = nil
	c.feed.mu.Unlock()
	for _, fi := range iters {
		fi.close()
	}
	if c.feed.fd > 0 {
		unix.Close(c.feed.fd)
		c.feed.fd = 0
	}
}

func (fi *feedIter) close() {
	releaseLocs(fi.pending)
	fi.pending, fi.recs, fi.held = nil, nil, nil
	fi.closeFiles(nil)
	for _, sl := range fi.slots {
		sl.close()
	}
	fi.slots = nil
}

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

// closeFiles closes the open shard files not in keep.
func (fi *feedIter) closeFiles(keep map[string]bool) {
	for p, f := range fi.files {
		if !keep[p] {
			f.Close()
			delete(fi.files, p)
		}
	}
}

// write sends one reply frame, with the pending memory file if any (which
// it then closes: the client holds its own descriptor).
func (c *conn) write(frame []byte) error {
	fd := c.feed.fd
	if fd <= 0 {
		_, err := c.nc.Write(frame)
		return err
	}
	c.feed.fd = 0
	defer unix.Close(fd)
	uc, ok := c.nc.(*net.UnixConn)
	if !ok {
		return errors.New("agent: feed batches need a unix socket")
	}
	n, oobn, err := uc.WriteMsgUnix(frame, unix.UnixRights(fd), nil)
	if err != nil {
		return err
	}
	if oobn == 0 {
		return errors.New("agent: the feed batch's descriptor was not sent")
	}
	if n < len(frame) {
		_, err = c.nc.Write(frame[n:])
	}
	return err
}

// feedNext answers a feed request: the iteration's next batch of exactly
// req.Max samples (fewer at its end) assembled in a memory file.
func (c *conn) feedNext(ctx context.Context, f agentapi.Frame) (any, []byte, error) {
	var req agentapi.FeedNext
	if err := decode(f, &req); err != nil {
		return nil, nil, err
	}
	if c.version < agentapi.FeedVersion {
		return nil, nil, badRequestf("feed needs protocol version %d, the connection speaks %d", agentapi.FeedVersion, c.version)
	}
	c.mu.Lock()
	it, ok := c.iters[req.Iter]
	c.mu.Unlock()
	c.feed.mu.Lock()
	fi := c.feed.iters[req.Iter]
	c.feed.mu.Unlock()
	if !ok || fi == nil {
		return nil, nil, badRequestf("unknown iteration %d", req.Iter)
	}
	if !fi.configured {
		if err := fi.configure(req.Transforms, feedTransforms()); err != nil {
			return nil, nil, err
		}
	}
	fi.free(req.Free)
	n := min(max(req.Max, 1), c.a.opts.MaxBatch)
	wait := c.a.opts.Wait
	if req.WaitMS > 0 {
		wait = min(wait, time.Duration(req.WaitMS)*time.Millisecond)
	}
	deadline := time.Now().Add(wait)
	for len(fi.pending) < n && !fi.done {
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		locs, done, err := it.take(ctx, n-len(fi.pending), left)
		if err != nil {
			return nil, nil, err
		}
		if fi.copyOut {
			if err := fi.copyRecords(locs); err != nil {
				releaseLocs(locs)
				return nil, nil, err
			}
		}
		fi.pending = append(fi.pending, locs...)
		fi.done = done
		if len(locs) == 0 && !done {
			break // the wait passed: answer empty, keep what was taken
		}
	}
	if len(fi.pending) < n && !fi.done {
		return agentapi.FeedBatch{Op: agentapi.OpFeed}, nil, nil
	}
	if len(fi.pending) == 0 {
		return agentapi.FeedBatch{Op: agentapi.OpFeed, Done: true}, nil, nil
	}
	k := min(n, len(fi.pending))
	batch := fi.pending[:k:k]
	fi.pending = fi.pending[k:]
	var recs [][]byte
	if fi.copyOut {
		recs = fi.recs[:k:k]
		fi.recs = fi.recs[k:]
	}
	hdr, fd, err := fi.assemble(batch, recs)
	releaseLocs(batch)
	if len(fi.pending) == 0 {
		// Nothing points into the arena any more: reuse it.
		fi.recs, fi.held = fi.recs[:0], fi.held[:0]
	}
	if err != nil {
		return nil, nil, err
	}
	c.feed.fd = fd
	c.a.mu.Lock()
	c.a.samples += int64(k)
	c.a.mu.Unlock()
	return hdr, nil, nil
}

// configure builds the iteration's transforms.
func (fi *feedIter) configure(specs []agentapi.FeedTransformSpec, table map[string]TransformFactory) error {
	fi.configured = true
	fi.plans = map[int]*feedSchema{}
	fi.transforms = map[string]ColumnTransform{}
	for _, s := range specs {
		mk, ok := table[s.Transform]
		if !ok {
			return fmt.Errorf("%w: feed: unknown transform %q for column %q", agentapi.ErrInvalid, s.Transform, s.Column)
		}
		col, ok := fi.column(s.Column)
		if !ok {
			return fmt.Errorf("%w: feed: transform %q names column %q, which the dataset lacks", agentapi.ErrInvalid, s.Transform, s.Column)
		}
		t, err := mk(col, s.Params)
		if err != nil {
			return fmt.Errorf("feed: transform %q of column %q: %w", s.Transform, s.Column, err)
		}
		out := t.Out()
		if out.Kind == agentapi.FeedFixed {
			es, ok := agentapi.FeedDTypeSize(out.DType)
			if !ok {
				return fmt.Errorf("feed: transform %q of column %q: dtype %q", s.Transform, s.Column, out.DType)
			}
			for _, d := range out.Shape {
				es *= d
			}
			if es <= 0 {
				return fmt.Errorf("feed: transform %q of column %q: shape %v", s.Transform, s.Column, out.Shape)
			}
		} else if out.Kind != agentapi.FeedVar {
			return fmt.Errorf("feed: transform %q of column %q: kind %q", s.Transform, s.Column, out.Kind)
		}
		fi.transforms[s.Column] = t
	}
	return nil
}

// column describes a column of the dataset's first schema that has it.
func (fi *feedIter) column(name string) (agentapi.FeedColumn, bool) {
	for _, s := range fi.ds.schemas {
		for i, n := range s.ColumnNames {
			if n != name || i >= len(s.ColumnEncodings) {
				continue
			}
			c := agentapi.FeedColumn{Name: n, Encoding: s.ColumnEncodings[i], Kind: agentapi.FeedVar}
			if i < len(s.ColumnSizes) && s.ColumnSizes[i] != nil {
				c.Kind, c.Stride = agentapi.FeedFixed, *s.ColumnSizes[i]
			}
			return c, true
		}
	}
	return agentapi.FeedColumn{}, false
}

// plan returns the feed plan of a shard's schema.
func (fi *feedIter) plan(shard int) (*feedSchema, int, error) {
	if shard < 0 || shard >= len(fi.ds.shardSchema) {
		return nil, 0, fmt.Errorf("%w: feed: shard %d outside the dataset", agentapi.ErrCorrupt, shard)
	}
	k := fi.ds.shardSchema[shard]
	if p, ok := fi.plans[k]; ok {
		return p, k, nil
	}
	p, err := planFeedSchema(fi.ds.schemas[k])
	if err != nil {
		return nil, 0, err
	}
	for i := range p.cols {
		if t, ok := fi.transforms[p.cols[i].name]; ok {
			out := t.Out()
			out.Name = p.cols[i].name
			if out.Kind == agentapi.FeedFixed {
				out.Stride, _ = agentapi.FeedDTypeSize(out.DType)
				for _, d := range out.Shape {
					out.Stride *= d
				}
			}
			p.cols[i].out, p.cols[i].transform = out, t
		}
	}
	fi.plans[k] = p
	return p, k, nil
}

// copyRecords reads the records of locs into the iteration's arena
// (appending to fi.recs), releases their leases (each location's release
// becomes a no-op) and closes the shard files: nothing of the shards is
// held once it returns. On error nothing was released.
func (fi *feedIter) copyRecords(locs []location) error {
	var need, have int64
	for _, l := range locs {
		need += l.length
	}
	for _, r := range fi.recs {
		have += int64(len(r))
	}
	if have+need > agentapi.MaxFeedBatch {
		return fmt.Errorf("%w: feed batch holds more than %d bytes", agentapi.ErrInvalid, int64(agentapi.MaxFeedBatch))
	}
	if int64(cap(fi.held)-len(fi.held)) < need {
		// A new arena; the records already copied keep the old one alive.
		fi.held = make([]byte, 0, max(2*int64(cap(fi.held)), need))
	}
	if fi.files == nil {
		fi.files = map[string]*os.File{}
	}
	recs := make([][]byte, len(locs))
	for i, l := range locs {
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

// assemble reads a batch's records (or takes them from recs, where
// copyRecords copied them) and writes the batch into a new memory file,
// returning its header and descriptor.
func (fi *feedIter) assemble(batch []location, recs [][]byte) (agentapi.FeedBatch, int, error) {
	p, k0, err := fi.plan(batch[0].shard)
	if err != nil {
		return agentapi.FeedBatch{}, 0, err
	}
	var total int64
	for _, l := range batch {
		_, k, err := fi.plan(l.shard)
		if err != nil {
			return agentapi.FeedBatch{}, 0, err
		}
		if k != k0 && !sameColumns(fi.ds.schemas[k], fi.ds.schemas[k0]) {
			return agentapi.FeedBatch{}, 0, fmt.Errorf("%w: feed: a batch mixes shards of different columns (%v and %v); collate such datasets with next", agentapi.ErrInvalid, fi.ds.schemas[k0].ColumnNames, fi.ds.schemas[k].ColumnNames)
		}
		total += l.length
	}
	if total > agentapi.MaxFeedBatch {
		return agentapi.FeedBatch{}, 0, fmt.Errorf("%w: feed batch of %d samples holds %d bytes, more than %d", agentapi.ErrInvalid, len(batch), total, int64(agentapi.MaxFeedBatch))
	}
	var scratch []byte
	if recs == nil {
		if int64(cap(fi.scratch)) < total {
			fi.scratch = make([]byte, total)
		}
		scratch = fi.scratch[:total]
	}
	if fi.files == nil {
		fi.files = map[string]*os.File{}
	}
	used := map[string]bool{}
	ids := make([]int64, len(batch))
	values := make([][][]byte, len(batch))
	ncol := len(p.cols)
	var srcs []feedSrc // values read straight into the batch's memory
	var pos int64
	for i, l := range batch {
		ids[i] = l.sample
		if recs != nil {
			if values[i], err = p.split(recs[i], make([][]byte, 0, ncol)); err != nil {
				return agentapi.FeedBatch{}, 0, fmt.Errorf("agent: feed: sample %d of %s: %w", l.sample, l.path, err)
			}
			continue
		}
		f, ok := fi.files[l.path]
		if !ok {
			if f, err = os.Open(l.path); err != nil {
				return agentapi.FeedBatch{}, 0, fmt.Errorf("agent: feed: read sample %d: %w", l.sample, err)
			}
			fi.files[l.path] = f
		}
		used[l.path] = true
		rec := scratch[pos : pos+l.length : pos+l.length]
		pos += l.length
		if l.length < directMin {
			if err := readFull(f, rec, l.offset); err != nil {
				return agentapi.FeedBatch{}, 0, fmt.Errorf("agent: feed: read sample %d from %s: %w", l.sample, l.path, err)
			}
			if values[i], err = p.split(rec, make([][]byte, 0, ncol)); err != nil {
				return agentapi.FeedBatch{}, 0, fmt.Errorf("agent: feed: sample %d of %s: %w", l.sample, l.path, err)
			}
			continue
		}
		// A large record: its column lengths first, then small columns
		// into scratch and large ones later straight into the batch.
		head := min(int64(4*p.nvar), l.length)
		if err := readFull(f, rec[:head], l.offset); err != nil {
			return agentapi.FeedBatch{}, 0, fmt.Errorf("agent: feed: read sample %d from %s: %w", l.sample, l.path, err)
		}
		spans, err := p.spans(rec[:head], l.length)
		if err != nil {
			return agentapi.FeedBatch{}, 0, fmt.Errorf("agent: feed: sample %d of %s: %w", l.sample, l.path, err)
		}
		values[i] = make([][]byte, ncol)
		for k, sp := range spans {
			if sp[1] >= directMin/2 && p.cols[k].transform == nil {
				if int64(len(fi.hole)) < sp[1] {
					fi.hole = make([]byte, sp[1])
				}
				values[i][k] = fi.hole[:sp[1]:sp[1]]
				if srcs == nil {
					srcs = make([]feedSrc, len(batch)*ncol)
				}
				srcs[i*ncol+k] = feedSrc{f: f, off: l.offset + sp[0]}
				continue
			}
			v := rec[sp[0] : sp[0]+sp[1] : sp[0]+sp[1]]
			if err := readFull(f, v, l.offset+sp[0]); err != nil {
				return agentapi.FeedBatch{}, 0, fmt.Errorf("agent: feed: read sample %d from %s: %w", l.sample, l.path, err)
			}
			values[i][k] = v
		}
	}
	fi.closeFiles(used)
	if err := fi.applyTransforms(p, ids, values); err != nil {
		return agentapi.FeedBatch{}, 0, err
	}
	cols := make([]agentapi.FeedColumn, len(p.cols))
	for i, c := range p.cols {
		cols[i] = c.out
	}
	hdr, pieces, meta, err := layoutFeed(cols, ids, values, fi.meta)
	fi.meta = meta
	if err != nil {
		return agentapi.FeedBatch{}, 0, err
	}
	hdr.Retired, fi.retired = fi.retired, nil
	sl, err := fi.slotFor(hdr.Size)
	if err != nil {
		return agentapi.FeedBatch{}, 0, err
	}
	if sl == nil {
		// Every slot is still viewed by the client: a file used once.
		fd, err := writeMemfd(hdr.Size, pieces, srcs, ncol)
		return hdr, fd, err
	}
	if err := fillFeed(sl.mem, pieces, srcs, ncol); err != nil {
		return agentapi.FeedBatch{}, 0, err
	}
	hdr.Slot = sl.id
	sl.busy = true
	fd := 0
	if !sl.sent {
		// The reply's descriptor is closed once sent; the slot keeps its own.
		if fd, err = unix.Dup(sl.fd); err != nil {
			sl.busy = false
			return agentapi.FeedBatch{}, 0, fmt.Errorf("agent: feed: %w", err)
		}
		unix.CloseOnExec(fd)
		sl.sent = true
	}
	return hdr, fd, nil
}

// sameColumns reports whether two schemas have the same columns and
// encodings (their batches collate alike).
func sameColumns(a, b agentapi.Schema) bool {
	if len(a.ColumnNames) != len(b.ColumnNames) || len(a.ColumnEncodings) != len(b.ColumnEncodings) {
		return false
	}
	for i := range a.ColumnNames {
		if a.ColumnNames[i] != b.ColumnNames[i] || a.ColumnEncodings[i] != b.ColumnEncodings[i] {
			return false
		}
	}
	return a.Format == b.Format
}

// applyTransforms replaces the values of transformed columns, spreading
// the samples over the cores.
func (fi *feedIter) applyTransforms(p *feedSchema, ids []int64, values [][][]byte) error {
	var cols []int
	for k, c := range p.cols {
		if c.transform != nil {
			cols = append(cols, k)
		}
	}
	if len(cols) == 0 {
		return nil
	}
	bufs := make([][]byte, len(cols))
	for j, k := range cols {
		if o := p.cols[k].out; o.Kind == agentapi.FeedFixed {
			bufs[j] = make([]byte, o.Stride*int64(len(ids)))
		}
	}
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	work := make(chan int)
	for range min(runtime.GOMAXPROCS(0), len(ids)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				s := fi.sample
				s.Sample = ids[i]
				for j, k := range cols {
					c := p.cols[k]
					var dst []byte
					if c.out.Kind == agentapi.FeedFixed {
						st := c.out.Stride
						dst = bufs[j][int64(i)*st : int64(i)*st : int64(i+1)*st]
					}
					out, err := c.transform.Append(dst, values[i][k], s)
					if err == nil && c.out.Kind == agentapi.FeedFixed && int64(len(out)) != c.out.Stride {
						err = fmt.Errorf("%w: transform wrote %d bytes, its output is %d", agentapi.ErrInternal, len(out), c.out.Stride)
					}
					if err != nil {
						errs[i] = fmt.Errorf("agent: feed: column %q of sample %d: %w", c.name, ids[i], err)
						break
					}
					values[i][k] = out
				}
			}
		}()
	}
	for i := range ids {
		work <- i
	}
	close(work)
	wg.Wait()
	return errors.Join(errs...)
}

// feedSrc is where a value read straight into the batch lies in its shard.
type feedSrc struct {
	f   *os.File
	off int64
}

// directMin is the record size from which values of at least half of it
// are read from the shard straight into the batch's memory (one copy
// instead of two).
const directMin = 32 << 10

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
