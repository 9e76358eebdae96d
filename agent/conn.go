package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/sluicedata/sluice/agentapi"
	"github.com/sluicedata/sluice/internal/version"
	"github.com/sluicedata/sluice/plan"
	"github.com/sluicedata/sluice/stream"
)

// conn is one client connection and everything it holds.
type conn struct {
	a  *Agent
	nc net.Conn

	// mu guards the fields below; the serving goroutine mutates them and
	// stats reads them.
	mu        sync.Mutex
	handles   map[int]*handle
	iters     map[int]*iteration
	batches   map[int64]*leased
	nextID    int
	nextBatch int64
	version   int

	feed   feedConn   // feed batches (feed.go)
	tarseq tarSeqConn // tar sequences (tarseq.go)

	// tail is the rest of the body of the reply being sent, after the
	// body handle returned: buffers reply sends without copying them
	// (conn_reply.go). Only the serving goroutine touches it.
	tail [][]byte
	// written holds the copy blocks of the copied records in tail, whose
	// references are dropped once the reply is written.
	written []*copyBlock
	// scratch is reply's buffer for small inline records, reused by the
	// next reply once the one that carried it is written.
	scratch []byte
	// mappers are the memory files of mapped copies (iteration_map.go)
	// of ended iterations, for the next ones; nextMem is the id of the
	// last file made; unmap lists the ids of files sent to the client
	// and closed since the last batch reply, which tells the client
	// (all three guarded by mu).
	mappers []*mapper
	nextMem int
	unmap   []int
	// sendMem is the memory file whose descriptor goes with the reply
	// being written (nil: none). Only the serving goroutine touches it.
	sendMem *mapper
}

// leased is a batch whose locations the client has not released yet.
type leased struct {
	iter int // the iteration that produced it; 0 for random access
	locs []location
}

// handle is an opened dataset on a connection.
type handle struct {
	ds  *sharedDataset
	job *job
}

func newConn(a *Agent, nc net.Conn) *conn {
	return &conn{
		a:       a,
		nc:      nc,
		handles: map[int]*handle{},
		iters:   map[int]*iteration{},
		batches: map[int64]*leased{},
	}
}

func (c *conn) counts() (iters, leases int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, b := range c.batches {
		leases += len(b.locs)
	}
	return len(c.iters), leases
}

// serveConn answers requests until the client goes away or ctx ends, then
// releases everything the connection held.
func (a *Agent) serveConn(ctx context.Context, c *conn) {
	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		c.nc.Close()
		c.releaseAll()
		a.removeConn(c)
	}()
	// Close the socket when ctx ends so a blocked read returns.
	stop := context.AfterFunc(ctx, func() { c.nc.Close() })
	defer stop()

	var rbuf, wbuf []byte
	for {
		f, buf, err := agentapi.ReadFrame(c.nc, rbuf)
		rbuf = buf
		if err != nil {
			if !errors.Is(err, io.EOF) && ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
				a.log.Debug("connection read", "err", err)
			}
			return
		}
		header, body, err := c.handle(ctx, f)
		tail, written, mem := c.tail, c.written, c.sendMem
		c.tail, c.written, c.sendMem = nil, nil, nil
		if err != nil {
			header, body, tail, written = errorReply(err), nil, nil, nil
			mem.unsent()
			mem = nil
		}
		size := len(body)
		for _, p := range tail {
			size += len(p)
		}
		wbuf, err = agentapi.AppendFrameHead(wbuf[:0], header, size)
		if err != nil {
			e := errorReply(err)
			wbuf, _ = agentapi.AppendFrame(wbuf[:0], e, nil)
			tail, written = nil, nil
			mem.unsent()
			mem = nil
		} else {
			wbuf = append(wbuf, body...)
		}
		if mem != nil {
			err = c.writeFD(wbuf, tail, mem.fd)
		} else {
			err = c.write(wbuf, tail)
		}
		if err != nil {
			return
		}
		for _, b := range written {
			b.done()
		}
		if cap(wbuf) > 16<<20 {
			wbuf = nil // do not pin a huge buffer for a small follow-up
		}
	}
}

// handle dispatches one request and returns the reply.
func (c *conn) handle(ctx context.Context, f agentapi.Frame) (any, []byte, error) {
	op, err := f.Op()
	if err != nil {
		return nil, nil, badRequestf("%v", err)
	}
	if c.version == 0 && op != agentapi.OpHello {
		return nil, nil, badRequestf("first request must be hello, got %q", op)
	}
	switch op {
	case agentapi.OpHello:
		var req agentapi.Hello
		if err := decode(f, &req); err != nil {
			return nil, nil, err
		}
		v := min(req.Version, agentapi.Version)
		if v < agentapi.MinVersion || v < req.MinVersion {
			return nil, nil, &agentapi.Error{Code: agentapi.CodeVersion, Message: fmt.Sprintf("client speaks versions %d..%d, agent %d..%d", req.MinVersion, req.Version, agentapi.MinVersion, agentapi.Version)}
		}
		c.version = v
		// The protocol is settled by Version; a client of another release
		// still works, and both sides say so (the client warns too).
		if _, cv, ok := strings.Cut(req.Software, "/"); ok && cv != version.Number() {
			c.a.log.Warn("client of another sluice release", "client", req.Software, "agent", version.Software(), "pid", req.PID)
		}
		return agentapi.Hello{Op: agentapi.OpHello, Version: v, MinVersion: agentapi.MinVersion, Software: "sluice-agent/" + version.Number(), PID: os.Getpid(),
			Features: append(features(), agentapi.FeatureOrderAdmissions)}, nil, nil
	case agentapi.OpOpen:
		var req agentapi.Open
		if err := decode(f, &req); err != nil {
			return nil, nil, err
		}
		out, err := c.open(ctx, req)
		return out, nil, err
	case agentapi.OpBegin:
		var req agentapi.Begin
		if err := decode(f, &req); err != nil {
			return nil, nil, err
		}
		out, err := c.begin(ctx, req)
		return out, nil, err
	case agentapi.OpNext:
		var req agentapi.Next
		if err := decode(f, &req); err != nil {
			return nil, nil, err
		}
		c.release(req.Release)
		return c.next(ctx, req)
	case agentapi.OpGet:
		var req agentapi.Get
		if err := decode(f, &req); err != nil {
			return nil, nil, err
		}
		c.release(req.Release)
		return c.get(ctx, req)
	case agentapi.OpFeed:
		return c.feedNext(ctx, f)
	case agentapi.OpRelease:
		var req agentapi.Release
		if err := decode(f, &req); err != nil {
			return nil, nil, err
		}
		c.release(req.Batches)
		return agentapi.OK{Op: agentapi.OpOK}, nil, nil
	case agentapi.OpEnd:
		var req agentapi.End
		if err := decode(f, &req); err != nil {
			return nil, nil, err
		}
		c.endIter(req.Iter)
		return agentapi.OK{Op: agentapi.OpOK}, nil, nil
	case agentapi.OpEpoch:
		var req agentapi.EpochQuery
		if err := decode(f, &req); err != nil {
			return nil, nil, err
		}
		h, err := c.handleOf(req.Handle)
		if err != nil {
			return nil, nil, err
		}
		return c.a.epochInfo(h.job, req.Rank), nil, nil
	case agentapi.OpStats:
		return c.a.stats(), nil, nil
	case agentapi.OpMetrics:
		var req agentapi.MetricsQuery
		if err := decode(f, &req); err != nil {
			return nil, nil, err
		}
		h, err := c.handleOf(req.Handle)
		if err != nil {
			return nil, nil, err
		}
		return c.a.jobMetrics(ctx, h.job, req.Rank), nil, nil
	default:
		if out, body, ok, err := c.tarSeqHandle(ctx, op, f); ok {
			return out, body, err
		}
		return nil, nil, badRequestf("unknown op %q", op)
	}
}

func decode(f agentapi.Frame, v any) error {
	if err := json.Unmarshal(f.Header, v); err != nil {
		return badRequestf("decode request: %v", err)
	}
	return nil
}

func (c *conn) handleOf(id int) (*handle, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.handles[id]
	if !ok {
		return nil, badRequestf("unknown dataset handle %d", id)
	}
	return h, nil
}

// datasetKey is the identity of a dataset: everything that defines its
// samples and order. Datasets with equal keys share one stream.Dataset.
func datasetKey(ds agentapi.Dataset) string {
	b, _ := json.Marshal(ds) // a struct of plain fields always marshals
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func (c *conn) open(ctx context.Context, req agentapi.Open) (agentapi.Opened, error) {
	if req.Job == "" {
		return agentapi.Opened{}, badRequestf("open: job is empty")
	}
	if err := checkWorld(req.World); err != nil {
		return agentapi.Opened{}, err
	}
	var env jobEnv
	if req.Env != nil {
		env = jobEnv(req.Env)
	}
	// Jobs with different store settings never share a dataset (nor its
	// stores): each authenticates against the store itself.
	key := datasetKey(req.Dataset) + env.fingerprint()
	ds, err := c.a.acquireDataset(ctx, key, req.Dataset, env)
	if err != nil {
		return agentapi.Opened{}, err
	}
	out, err := ds.info(req.World)
	if err != nil {
		c.a.releaseDataset(ds)
		return agentapi.Opened{}, err
	}
	j := c.a.acquireJob(req.Job+"\x00"+key, ds)
	c.mu.Lock()
	c.nextID++
	id := c.nextID
	c.handles[id] = &handle{ds: ds, job: j}
	c.mu.Unlock()
	out.Op = agentapi.OpOpen
	out.Handle = id
	if w := limitWarning(req.Dataset, ds); w != "" {
		out.Warnings = append(out.Warnings, w)
	}
	// Tars indexed by a scan of their headers: said once per job, to the
	// leader worker (every node scans; the advice is the same).
	if req.World.Rank == 0 && req.World.Worker == 0 {
		for _, w := range ds.ds.OpenWarnings() {
			c.a.log.Warn("tar index built by a scan", "job", req.Job, "advice", w)
			out.Warnings = append(out.Warnings, w)
		}
	}
	return out, nil
}

// limitWarning explains a cache_limit that does not apply: one cache
// directory has one limit while the agent runs, the limit of the first
// dataset that opened it; later datasets share it whatever they ask.
func limitWarning(spec agentapi.Dataset, ds *sharedDataset) string {
	c := ds.opts.Cache
	if c == nil {
		return ""
	}
	var want int64
	if spec.CacheLimit != "" {
		n, err := stream.ParseBytes(spec.CacheLimit)
		if err != nil {
			return ""
		}
		want = n
	}
	if want == c.Limit() {
		return ""
	}
	have := "no limit"
	if c.Limit() > 0 {
		have = fmt.Sprintf("a limit of %d bytes", c.Limit())
	}
	asked := "no limit"
	if want > 0 {
		asked = fmt.Sprintf("cache_limit=%s", spec.CacheLimit)
	}
	return fmt.Sprintf("%s does not apply: the cache directory %s is already open in the agent with %s, set by the first dataset that opened it; every dataset over one cache directory shares its limit while the agent runs", asked, c.Dir(), have)
}

func checkWorld(w agentapi.World) error {
	ws, lws, nw := max(w.WorldSize, 1), max(w.LocalWorldSize, 1), max(w.NumWorkers, 1)
	switch {
	case w.Rank < 0 || w.Rank >= ws:
		return badRequestf("rank %d outside world size %d", w.Rank, ws)
	case ws%lws != 0:
		return badRequestf("world size %d is not a multiple of local world size %d", ws, lws)
	case w.Worker < 0 || w.Worker >= nw:
		return badRequestf("worker %d outside %d workers", w.Worker, nw)
	}
	return nil
}

// servedShards is how many shards one client iteration may hold leased
// at once: the two batches a pipelining client holds (consecutive, so at
// most two shards between them) and the shard the iteration's producer
// has moved on to (see iteration.run).
const servedShards = 3

// begin starts one worker's iteration of its next epoch, on the job's
// cursor for that (rank, worker): the cursor's tracker applies MosaicML's
// epoch counter and resume rules.
func (c *conn) begin(ctx context.Context, req agentapi.Begin) (agentapi.Begun, error) {
	h, err := c.handleOf(req.Handle)
	if err != nil {
		return agentapi.Begun{}, err
	}
	if err := checkWorld(req.World); err != nil {
		return agentapi.Begun{}, err
	}
	if req.Skip < 0 {
		return agentapi.Begun{}, badRequestf("skip %d is negative", req.Skip)
	}
	// Every DataLoader worker of every local rank may hold up to
	// servedShards shards at once; the limit must hold them all plus one
	// being fetched, or some worker can wait for space for ever.
	holders := max(req.World.LocalWorldSize, 1) * max(req.World.NumWorkers, 1) * servedShards
	if err := h.ds.ds.CheckLimit(holders); err != nil {
		return agentapi.Begun{}, fmt.Errorf("agent: %d local ranks × %d workers, each holding up to %d shards: %w",
			max(req.World.LocalWorldSize, 1), max(req.World.NumWorkers, 1), servedShards, err)
	}
	cur, err := c.a.cursor(ctx, h.job, req.World.Rank, req.World.Worker)
	if err != nil {
		return agentapi.Begun{}, err
	}
	if req.Resume != nil {
		load := cur.Load
		if req.Epoch != nil {
			// A worker continuing an epoch it lost (its leased shard
			// vanished, or the agent restarted): this cursor may already
			// have counted that epoch as begun.
			load = cur.Continue
		}
		if err := load(planState(*req.Resume)); err != nil {
			return agentapi.Begun{}, err
		}
	}
	// The rank's workers play one epoch counter, as MosaicML's share
	// next_epoch (rounds.go); a worker continuing an epoch it lost names
	// its epoch itself.
	newRound := false
	if req.Epoch == nil {
		newRound = c.a.presumeRound(h.job, req.World.Rank, req.World.Worker, max(req.World.NumWorkers, 1), req.Round, cur)
	}
	ep, err := cur.NewEpoch(ctx, planWorld(req.World, h.ds.opts.Replication), max(req.World.NumWorkers, 1))
	if err != nil {
		return agentapi.Begun{}, err
	}
	if newRound {
		c.a.settleRound(h.job, req.World.Rank, ep.Number())
	}
	if req.Epoch != nil && ep.Number() != *req.Epoch {
		return agentapi.Begun{}, badRequestf("asked to continue epoch %d, but the resume state gives epoch %d", *req.Epoch, ep.Number())
	}
	spec := ep.Spec()
	ahead := 0
	if h.ds.opts.Cache != nil && h.ds.opts.Cache.Limit() > 0 {
		// One leased run ahead of the client: the bound the limit check
		// above guarantees progress for. Sizing it to the room the limit
		// leaves for this begin's shape (aheadFor) let iterations of other
		// shapes on the same cache (a 0-worker epoch before a 2-worker
		// one, other jobs) fill it, and a worker stalled (test_wds_dist, 1
		// CI run in 4).
		ahead = 1
	}
	// Past that run the iteration reads on where no download is needed,
	// copying records that hold no lease (iteration_ahead.go); not where
	// the rank's workers take turns (OrderAdmissions): there what each
	// worker leases when follows the rank's order, which the simulator
	// plays, and is left as it was.
	readAhead := ahead > 0 && !(h.ds.opts.OrderAdmissions && req.World.NumWorkers > 1)
	var m *mapper
	if req.MapCopies && readAhead {
		m = c.mapper()
	}
	it, err := startIteration(ep, req.World.Worker, req.Skip, iterShards{sizes: h.ds.shardBytes, schemas: h.ds.shardSchema}, ahead, readAhead, m)
	if err != nil {
		c.putMapper(m)
		return agentapi.Begun{}, err
	}
	c.a.noteStarted(h.job, req.World.Rank, spec)
	c.mu.Lock()
	c.nextID++
	id := c.nextID
	c.iters[id] = it
	c.mu.Unlock()
	c.feedBegun(id, h.ds, spec, ahead > 0)
	out := agentapi.Begun{
		Op:                   agentapi.OpBegin,
		Iter:                 id,
		Epoch:                spec.Epoch,
		SampleInEpoch:        spec.SampleInEpoch,
		NumCanonicalNodes:    spec.NumCanonicalNodes,
		ShuffleSeed:          seedOf(spec),
		InitialPhysicalNodes: int64(spec.InitialPhysicalNodes),
	}
	// The check is global: one warning per job, from the leader worker.
	if req.World.Rank == 0 && req.World.Worker == 0 {
		if err := ep.Plan().ResumeCheck(); err != nil {
			c.a.log.Warn("inexact resume", "job", h.job.key, "err", err)
			out.Warnings = append(out.Warnings, err.Error()+" (MosaicML Streaming plays the same order and does not say so; see docs/migrating-from-mosaicml.md)")
		}
	}
	return out, nil
}

func seedOf(spec plan.EpochSpec) int64 {
	if spec.ShuffleSeed != nil {
		return *spec.ShuffleSeed
	}
	return plan.DefaultShuffleSeed
}

func (a *Agent) epochInfo(j *job, rank int) agentapi.EpochInfo {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := agentapi.EpochInfo{Op: agentapi.OpEpoch}
	if st, ok := j.started[rank]; ok {
		out.NextEpoch = st.Epoch + 1
		out.NumCanonicalNodes = st.NumCanonicalNodes
		out.ShuffleSeed = seedOf(st)
		out.InitialPhysicalNodes = int64(st.InitialPhysicalNodes)
	}
	return out
}

func (c *conn) next(ctx context.Context, req agentapi.Next) (any, []byte, error) {
	c.mu.Lock()
	it, ok := c.iters[req.Iter]
	c.mu.Unlock()
	if !ok {
		return nil, nil, badRequestf("unknown iteration %d", req.Iter)
	}
	n := min(max(req.Max, 1), c.a.opts.MaxBatch)
	wait := c.a.opts.Wait
	if req.WaitMS > 0 {
		wait = min(wait, time.Duration(req.WaitMS)*time.Millisecond)
	}
	if req.MapCopies && it.copies && it.mapped.Load() == nil {
		it.mapped.Store(c.mapper())
	}
	locs, done, err := it.take(ctx, n, wait)
	if err != nil {
		return nil, nil, err
	}
	return c.reply(req.Iter, locs, done, req.InlineMax)
}

func (c *conn) get(ctx context.Context, req agentapi.Get) (any, []byte, error) {
	h, err := c.handleOf(req.Handle)
	if err != nil {
		return nil, nil, err
	}
	loc, rec, err := h.ds.get(ctx, req.Index)
	if err != nil {
		return nil, nil, err
	}
	b := agentapi.Batch{Op: agentapi.OpBatch, N: 1, Shards: []agentapi.BatchShard{{Shard: loc.shard, Size: loc.size}}}
	body := agentapi.AppendEntry(nil, agentapi.Entry{Sample: loc.sample, Ref: agentapi.InlineFlag, Length: uint32(len(rec))})
	return b, append(body, rec...), nil
}

func (c *conn) release(ids []int64) {
	if len(ids) == 0 {
		return
	}
	c.mu.Lock()
	var drop []*leased
	for _, id := range ids {
		if b, ok := c.batches[id]; ok {
			drop = append(drop, b)
			delete(c.batches, id)
		}
	}
	c.mu.Unlock()
	for _, b := range drop {
		releaseLocs(b.locs)
	}
}

// endIter stops an iteration and releases every batch it produced.
func (c *conn) endIter(id int) {
	c.mu.Lock()
	it, ok := c.iters[id]
	delete(c.iters, id)
	var drop []*leased
	for bid, b := range c.batches {
		if b.iter == id {
			drop = append(drop, b)
			delete(c.batches, bid)
		}
	}
	c.mu.Unlock()
	if ok {
		it.stop()
	}
	c.feedEnd(id)
	for _, b := range drop {
		releaseLocs(b.locs)
	}
	if ok {
		c.putMapper(it.mapped.Load())
	}
}

// releaseAll drops everything the connection held.
func (c *conn) releaseAll() {
	c.mu.Lock()
	iters, batches, handles := c.iters, c.batches, c.handles
	c.iters, c.batches, c.handles = map[int]*iteration{}, map[int64]*leased{}, map[int]*handle{}
	c.mu.Unlock()
	for _, it := range iters {
		it.stop()
	}
	for _, b := range batches {
		releaseLocs(b.locs)
	}
	c.feedEndAll()
	c.tarSeqEndAll()
	for _, it := range iters {
		if m := it.mapped.Load(); m != nil {
			m.close()
		}
	}
	c.closeMappers()
	for _, h := range handles {
		c.a.releaseJob(h.job)
		c.a.releaseDataset(h.ds)
	}
}
