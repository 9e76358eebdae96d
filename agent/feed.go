package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
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
	// copyOut: under a cache limit, when a take leaves the batch short,
	// the records of the pending samples are copied into held (recs[i]
	// is pending[i]'s record; recs covers a prefix of pending) and their
	// shard leases released, so that a batch that spans more shards than
	// the limit leaves room for never pins them all while it fills (the
	// producer waits for room to fetch the next one). A batch that one
	// take completes, and every batch without a limit, reads its records
	// straight from the leased shards into its memory (one copy less).
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

// closeFiles closes the open shard files not in keep.
func (fi *feedIter) closeFiles(keep map[string]bool) {
	for p, f := range fi.files {
		if !keep[p] {
			f.Close()
			delete(fi.files, p)
		}
	}
}

// write sends one reply frame, the rest of its body in tail (one gathered
// write), with the pending memory file if any (which it then closes: the
// client holds its own descriptor; a reply with a memory file has no
// tail).
func (c *conn) write(frame []byte, tail [][]byte) error {
	fd := c.feed.fd
	if fd <= 0 {
		if len(tail) > 0 {
			bufs := make(net.Buffers, 0, 1+len(tail))
			bufs = append(append(bufs, frame), tail...)
			_, err := bufs.WriteTo(c.nc)
			return err
		}
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
	if it.mapped.Load() != nil {
		// Its copies are in a memory file the feed does not read.
		return nil, nil, badRequestf("iteration %d maps its copies (map_copies): read it with next, not feed", req.Iter)
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
		fi.pending = append(fi.pending, locs...)
		fi.done = done
		if fi.copyOut && len(fi.pending) < n && !done {
			// The batch waits for more: let its shards go meanwhile.
			if err := fi.copyRecords(fi.pending[len(fi.recs):]); err != nil {
				return nil, nil, err
			}
		}
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
	if c := min(k, len(fi.recs)); c > 0 {
		recs = fi.recs[:c:c]
		fi.recs = fi.recs[c:]
	}
	hdr, fd, err := fi.assemble(batch, recs)
	releaseLocs(batch)
	// The batch's copies are in the slot now: their blocks may be reused.
	for _, l := range batch {
		if l.blk != nil {
			l.blk.done()
		}
	}
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

// assemble reads a batch's records (those of its first len(recs)
// samples copyRecords copied already) and writes the batch into a new
// memory file, returning its header and descriptor.
func (fi *feedIter) assemble(batch []location, recs [][]byte) (agentapi.FeedBatch, int, error) {
	p, k0, err := fi.plan(batch[0].shard)
	if err != nil {
		return agentapi.FeedBatch{}, 0, err
	}
	var total, direct int64
	for i, l := range batch {
		_, k, err := fi.plan(l.shard)
		if err != nil {
			return agentapi.FeedBatch{}, 0, err
		}
		if k != k0 && !sameColumns(fi.ds.schemas[k], fi.ds.schemas[k0]) {
			return agentapi.FeedBatch{}, 0, fmt.Errorf("%w: feed: a batch mixes shards of different columns (%v and %v); collate such datasets with next", agentapi.ErrInvalid, fi.ds.schemas[k0].ColumnNames, fi.ds.schemas[k].ColumnNames)
		}
		total += l.length
		if i >= len(recs) && l.rec == nil {
			direct += l.length
		}
	}
	if total > agentapi.MaxFeedBatch {
		return agentapi.FeedBatch{}, 0, fmt.Errorf("%w: feed batch of %d samples holds %d bytes, more than %d", agentapi.ErrInvalid, len(batch), total, int64(agentapi.MaxFeedBatch))
	}
	if int64(cap(fi.scratch)) < direct {
		fi.scratch = make([]byte, direct)
	}
	scratch := fi.scratch[:direct]
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
		if i < len(recs) || l.rec != nil {
			rec := l.rec
			if i < len(recs) {
				rec = recs[i]
			}
			if values[i], err = p.split(rec, make([][]byte, 0, ncol)); err != nil {
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
		// A large record: small columns into scratch, large values later
		// straight into the batch (readLarge).
		values[i] = make([][]byte, ncol)
		if srcs, err = fi.readLarge(p, f, l, rec, values[i], srcs, i*ncol, len(batch)*ncol); err != nil {
			return agentapi.FeedBatch{}, 0, fmt.Errorf("agent: feed: sample %d of %s: %w", l.sample, l.path, err)
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
	return firstOf(errs)
}

// firstOf is the first non-nil error of errs, saying how many other
// samples failed too (a batch of bad images would otherwise make one
// message of hundreds of lines).
func firstOf(errs []error) error {
	var first error
	more := 0
	for _, err := range errs {
		switch {
		case err == nil:
		case first == nil:
			first = err
		default:
			more++
		}
	}
	if more > 0 {
		return fmt.Errorf("%w (and %d more samples of the batch)", first, more)
	}
	return first
}
