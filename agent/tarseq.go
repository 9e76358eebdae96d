package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/sluicedata/sluice/agentapi"
	"github.com/sluicedata/sluice/stream"
)

// Tar datasets streamed in WebDataset's sequential way, without an index
// (stream.TarSequence; docs/protocol.md, "Tar sequence"). Each handle owns
// one stream.TarSequence over the agent's cache for its directory (so one
// download per shard per node, one limit); each iteration is one reader
// (rank, worker) of one epoch. The agent keeps, per job and reader, the
// next epoch to play and where each delivered sample came from, so that
// tarseq_state can turn the samples a rank's training loop consumed into
// exact resume states, and a DataLoader worker started afresh each epoch
// plays the next epoch.

const (
	// tarSeqMaxBatch bounds the samples of one tarseq_batch reply.
	tarSeqMaxBatch = 256
	// tarSeqMaxBody bounds its body (it may exceed it by one record).
	tarSeqMaxBody = 8 << 20
	// tarSeqMaxReaders bounds the readers the agent remembers; the least
	// recently begun is forgotten first (its job then counts epochs from
	// 0 again and cannot take a state of its last epoch).
	tarSeqMaxReaders = 4096
)

// tarSeqConn is a connection's tar-sequence handles and iterations,
// touched only by the connection's serving goroutine (and releaseAll
// after it returned).
type tarSeqConn struct {
	handles map[int]*tarSeqHandle
	iters   map[int]*tarSeqIter
	nextID  int
}

type tarSeqHandle struct {
	seq *stream.TarSequence
	key string // job + dataset identity + store settings
	env jobEnv
}

type tarSeqIter struct {
	it  *stream.TarSeqIterator
	log *tarSeqRun
}

// tarSeqJobs is the agent's per job and reader record (Agent.tarseq).
type tarSeqJobs struct {
	mu      sync.Mutex
	readers map[string]*tarSeqReader // by handle key + rank/ranks/worker/workers
	workers map[string]int           // by handle key + rank: workers of its latest begin
	clock   int64                    // counts reader look-ups, for forgetting
}

// tarSeqReader is one reader of one job.
type tarSeqReader struct {
	last      int64 // tarSeqJobs.clock at the latest look-up
	nextEpoch int64
	used      map[string]bool // resume tokens already applied
	cur       *tarSeqRun      // the latest epoch begun
}

// tarSeqRun records what one epoch's iteration delivered: from start, one
// span per shard position, so that a count of consumed samples maps back
// onto a position.
type tarSeqRun struct {
	start stream.TarSeqState
	spans []tarSeqSpan
	total int64
	done  bool // the reader's epoch ended with every sample delivered
}

type tarSeqSpan struct {
	pos, first, n int
}

// reader returns the record of reader key; j.mu must be held.
func (j *tarSeqJobs) reader(key string) *tarSeqReader {
	if j.readers == nil {
		j.readers = map[string]*tarSeqReader{}
	}
	j.clock++
	r, ok := j.readers[key]
	if !ok {
		if len(j.readers) >= tarSeqMaxReaders {
			j.forgetOldest()
		}
		r = &tarSeqReader{used: map[string]bool{}}
		j.readers[key] = r
	}
	r.last = j.clock
	return r
}

// forgetOldest drops the least recently used reader; j.mu must be held.
func (j *tarSeqJobs) forgetOldest() {
	oldest, at := "", int64(-1)
	for k, r := range j.readers {
		if at < 0 || r.last < at {
			oldest, at = k, r.last
		}
	}
	delete(j.readers, oldest)
	if len(j.workers) > tarSeqMaxReaders {
		clear(j.workers) // a hint only: tarseq_state then needs workers
	}
}

func readerKey(key string, rank, ranks, worker, workers int) string {
	return fmt.Sprintf("%s\x00%d/%d\x00%d/%d", key, rank, ranks, worker, workers)
}

// tarSeqHandle dispatches the tar-sequence ops; ok false for other ops.
func (c *conn) tarSeqHandle(ctx context.Context, op string, f agentapi.Frame) (out any, body []byte, ok bool, err error) {
	switch op {
	case agentapi.OpTarSeqOpen:
		var req agentapi.TarSeqOpen
		if err := decode(f, &req); err != nil {
			return nil, nil, true, err
		}
		out, err := c.tarSeqOpen(ctx, req)
		return out, nil, true, err
	case agentapi.OpTarSeqBegin:
		var req agentapi.TarSeqBegin
		if err := decode(f, &req); err != nil {
			return nil, nil, true, err
		}
		out, err := c.tarSeqBegin(req)
		return out, nil, true, err
	case agentapi.OpTarSeqNext:
		var req agentapi.TarSeqNext
		if err := decode(f, &req); err != nil {
			return nil, nil, true, err
		}
		out, body, err := c.tarSeqNext(req)
		return out, body, true, err
	case agentapi.OpTarSeqEnd:
		var req agentapi.TarSeqEnd
		if err := decode(f, &req); err != nil {
			return nil, nil, true, err
		}
		c.tarSeqEnd(req.Iter)
		return agentapi.OK{Op: agentapi.OpOK}, nil, true, nil
	case agentapi.OpTarSeqState:
		var req agentapi.TarSeqStateQuery
		if err := decode(f, &req); err != nil {
			return nil, nil, true, err
		}
		out, err := c.tarSeqState(req)
		return out, nil, true, err
	}
	return nil, nil, false, nil
}

func (c *conn) tarSeqOpen(ctx context.Context, req agentapi.TarSeqOpen) (agentapi.TarSeqOpened, error) {
	if req.Job == "" {
		return agentapi.TarSeqOpened{}, badRequestf("tarseq_open: job is empty")
	}
	if req.Remote == "" {
		return agentapi.TarSeqOpened{}, badRequestf("tarseq_open: remote is empty")
	}
	env := jobEnv(req.Env)
	ctx = withEnv(ctx, env)
	// The store and cache plumbing of an indexed dataset: the agent's
	// registry and retry policy, one cache per directory.
	o, err := c.a.streamOptions(ctx, agentapi.Dataset{Remote: req.Remote, Local: req.Local, CacheLimit: req.CacheLimit})
	if err != nil {
		return agentapi.TarSeqOpened{}, err
	}
	o.Shuffle = req.Shuffle
	o.ShuffleSeed = req.ShuffleSeed
	if req.DownloadRetry != nil {
		o.DownloadRetry = *req.DownloadRetry
	}
	if req.DownloadTimeout != nil {
		o.DownloadTimeout = seconds(*req.DownloadTimeout)
	}
	if o.Cache != nil {
		// OpenTarSequence names the cache folder after Remote.
		o.Local = ""
	}
	seq, err := stream.OpenTarSequence(ctx, &o)
	if err != nil {
		return agentapi.TarSeqOpened{}, err
	}
	spec, _ := json.Marshal(struct {
		Job, Remote, Local string
		Shuffle            bool
		Seed               *int64
	}{req.Job, req.Remote, req.Local, req.Shuffle, req.ShuffleSeed})
	sum := sha256.Sum256(spec)
	h := &tarSeqHandle{seq: seq, key: hex.EncodeToString(sum[:]) + env.fingerprint(), env: env}
	out := agentapi.TarSeqOpened{Op: agentapi.OpTarSeqOpen, ShardURLs: make([]string, seq.NumShards())}
	for i := range out.ShardURLs {
		out.ShardURLs[i] = seq.ShardURL(i)
	}
	c.mu.Lock()
	if c.tarseq.handles == nil {
		c.tarseq.handles, c.tarseq.iters = map[int]*tarSeqHandle{}, map[int]*tarSeqIter{}
	}
	c.tarseq.nextID++
	out.Handle = c.tarseq.nextID
	c.tarseq.handles[out.Handle] = h
	c.mu.Unlock()
	return out, nil
}

func (c *conn) tarSeqHandleOf(id int) (*tarSeqHandle, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.tarseq.handles[id]
	if !ok {
		return nil, badRequestf("unknown tar sequence handle %d", id)
	}
	return h, nil
}

func (c *conn) tarSeqBegin(req agentapi.TarSeqBegin) (agentapi.TarSeqBegun, error) {
	h, err := c.tarSeqHandleOf(req.Handle)
	if err != nil {
		return agentapi.TarSeqBegun{}, err
	}
	sh := stream.TarSeqShape{Rank: req.Rank, Ranks: max(req.Ranks, 1), Worker: req.Worker, Workers: max(req.Workers, 1)}
	ctx := withEnv(context.Background(), h.env)
	c.a.tarseq.mu.Lock()
	defer c.a.tarseq.mu.Unlock()
	rd := c.a.tarseq.reader(readerKey(h.key, sh.Rank, sh.Ranks, sh.Worker, sh.Workers))
	if c.a.tarseq.workers == nil {
		c.a.tarseq.workers = map[string]int{}
	}
	c.a.tarseq.workers[fmt.Sprintf("%s\x00%d", h.key, sh.Rank)] = sh.Workers
	var it *stream.TarSeqIterator
	var start stream.TarSeqState
	if req.Resume != nil && (req.ResumeToken == "" || !rd.used[req.ResumeToken]) {
		start = stream.TarSeqState(*req.Resume)
		rs := sh
		if start.Ranks == sh.Ranks && start.Workers == sh.Workers && start.Worker >= 0 && start.Worker < sh.Workers {
			// On the same shape, DataLoader worker w may continue another
			// worker's list (see tarSeqState).
			rs.Worker = start.Worker
		}
		it, err = h.seq.Resume(ctx, start, rs)
		if errors.Is(err, stream.ErrTarSeqShape) {
			return agentapi.TarSeqBegun{}, &agentapi.Error{Code: agentapi.CodeInvalid, Message: err.Error()}
		}
		if err == nil && req.ResumeToken != "" {
			rd.used[req.ResumeToken] = true
		}
	} else {
		start = stream.TarSeqState{Epoch: rd.nextEpoch, Ranks: sh.Ranks, Workers: sh.Workers, Rank: sh.Rank, Worker: sh.Worker}
		it, err = h.seq.Iter(ctx, rd.nextEpoch, sh)
	}
	if err != nil {
		return agentapi.TarSeqBegun{}, err
	}
	rd.nextEpoch = start.Epoch + 1
	run := &tarSeqRun{start: start}
	rd.cur = run
	ti := &tarSeqIter{it: it, log: run}
	c.mu.Lock()
	c.tarseq.nextID++
	id := c.tarseq.nextID
	c.tarseq.iters[id] = ti
	c.mu.Unlock()
	return agentapi.TarSeqBegun{Op: agentapi.OpTarSeqBegin, Iter: id, Epoch: start.Epoch, Shards: it.Shards()}, nil
}

func (c *conn) tarSeqNext(req agentapi.TarSeqNext) (any, []byte, error) {
	c.mu.Lock()
	ti, ok := c.tarseq.iters[req.Iter]
	c.mu.Unlock()
	if !ok {
		return nil, nil, badRequestf("unknown tar sequence iteration %d", req.Iter)
	}
	n := min(max(req.Max, 1), tarSeqMaxBatch)
	out := agentapi.TarSeqBatch{Op: agentapi.OpTarSeqBatch}
	var body []byte
	var spans []tarSeqSpan
	for out.N < n && len(body) < tarSeqMaxBody {
		if !ti.it.Next() {
			if err := ti.it.Err(); err != nil {
				if out.N > 0 {
					break // deliver what was read; the error comes next time
				}
				return nil, nil, err
			}
			if out.N == 0 {
				out.Done = true
			}
			break
		}
		rec := ti.it.Record()
		shard, j := ti.it.Shard()
		st := ti.it.State()
		if k := len(spans); k > 0 && spans[k-1].pos == st.Shard {
			spans[k-1].n++
		} else {
			spans = append(spans, tarSeqSpan{pos: st.Shard, first: j, n: 1})
		}
		body = append(body, rec...)
		out.Lengths = append(out.Lengths, int64(len(rec)))
		out.Shards = append(out.Shards, shard)
		out.N++
	}
	c.a.tarseq.mu.Lock()
	for _, s := range spans {
		ti.log.add(s)
	}
	if out.Done {
		ti.log.done = true
	}
	c.a.tarseq.mu.Unlock()
	c.a.mu.Lock()
	c.a.samples += int64(out.N)
	c.a.mu.Unlock()
	return out, body, nil
}

func (r *tarSeqRun) add(s tarSeqSpan) {
	if k := len(r.spans); k > 0 && r.spans[k-1].pos == s.pos && r.spans[k-1].first+r.spans[k-1].n == s.first {
		r.spans[k-1].n += s.n
	} else {
		r.spans = append(r.spans, s)
	}
	r.total += int64(s.n)
}

// at returns the resume state after the first n samples the run delivered.
func (r *tarSeqRun) at(n int64) (stream.TarSeqState, error) {
	st := r.start
	if n > r.total {
		return st, fmt.Errorf("%d samples consumed, but worker %d of rank %d was delivered %d in epoch %d", n, st.Worker, st.Rank, r.total, st.Epoch)
	}
	for _, s := range r.spans {
		if n == 0 {
			break
		}
		k := min(n, int64(s.n))
		st.Shard, st.Sample = s.pos, s.first+int(k)
		n -= k
	}
	return st, nil
}

func (c *conn) tarSeqEnd(id int) {
	c.mu.Lock()
	ti, ok := c.tarseq.iters[id]
	delete(c.tarseq.iters, id)
	c.mu.Unlock()
	if ok {
		ti.it.Close()
	}
}

// tarSeqState maps the samples a rank consumed in its current epoch onto
// each worker's: torch's DataLoader takes one batch from each worker in
// turn, and a worker whose iterator has ended drops out of the turn.
func (c *conn) tarSeqState(req agentapi.TarSeqStateQuery) (agentapi.TarSeqStates, error) {
	h, err := c.tarSeqHandleOf(req.Handle)
	if err != nil {
		return agentapi.TarSeqStates{}, err
	}
	workers, ranks, batch := max(req.Workers, 1), max(req.Ranks, 1), max(req.BatchSize, 1)
	if req.NumSamples < 0 {
		return agentapi.TarSeqStates{}, badRequestf("num_samples %d is negative", req.NumSamples)
	}
	if workers > 1<<12 || req.Rank < 0 || req.Rank >= ranks {
		return agentapi.TarSeqStates{}, badRequestf("rank %d of %d with %d workers is out of range", req.Rank, ranks, workers)
	}
	c.a.tarseq.mu.Lock()
	defer c.a.tarseq.mu.Unlock()
	if req.Workers <= 0 {
		// The rank's DataLoader has as many workers as its latest begin.
		workers = max(c.a.tarseq.workers[fmt.Sprintf("%s\x00%d", h.key, req.Rank)], 1)
	}
	runs := make([]*tarSeqRun, workers)
	for k := range runs {
		rd := c.a.tarseq.reader(readerKey(h.key, req.Rank, ranks, k, workers))
		if rd.cur == nil {
			return agentapi.TarSeqStates{}, &agentapi.Error{Code: agentapi.CodeInvalid,
				Message: fmt.Sprintf("tar sequence: worker %d of %d of rank %d has not begun an epoch of this job", k, workers, req.Rank)}
		}
		runs[k] = rd.cur
	}
	used, next, err := splitConsumed(runs, req.NumSamples, batch)
	if err != nil {
		return agentapi.TarSeqStates{}, &agentapi.Error{Code: agentapi.CodeInvalid, Message: "tar sequence state: " + err.Error()}
	}
	out := agentapi.TarSeqStates{Op: agentapi.OpTarSeqState}
	end := true
	for k, r := range runs {
		end = end && r.done && used[k] == r.total
	}
	for w := range runs {
		// torch begins every iteration with worker 0: the resumed worker w
		// reads the list of the worker whose turn came at w (its state
		// names it), so the workers' batches come in the same turn as
		// they would have.
		k := (w + next) % workers
		r := runs[k]
		st, err := r.at(used[k])
		if err != nil {
			return agentapi.TarSeqStates{}, &agentapi.Error{Code: agentapi.CodeInvalid, Message: "tar sequence state: " + err.Error()}
		}
		if end {
			// Every worker finished: the next epoch from its start.
			st = stream.TarSeqState{Epoch: r.start.Epoch + 1, Ranks: ranks, Workers: workers, Rank: req.Rank, Worker: w}
		}
		out.Workers = append(out.Workers, agentapi.TarSeqState(st))
	}
	return out, nil
}

// splitConsumed replays torch's turn over the workers' batches: worker k
// yields batches of batch samples (the last one short once its run is
// done), until n samples were taken. It returns each worker's count and
// the worker whose turn comes next.
func splitConsumed(runs []*tarSeqRun, n int64, batch int) ([]int64, int, error) {
	used := make([]int64, len(runs))
	out := make([]bool, len(runs))
	live := len(runs)
	k := 0
	for ; n > 0; k = (k + 1) % len(runs) {
		if live == 0 {
			return nil, 0, fmt.Errorf("%d more samples consumed than the workers delivered", n)
		}
		if out[k] {
			continue
		}
		b := int64(batch)
		if r := runs[k]; r.done {
			b = min(b, r.total-used[k])
		}
		if b <= 0 {
			out[k] = true
			live--
			continue
		}
		if b > n {
			// A batch taken in part: this worker's turn continues.
			used[k] += n
			return used, k, nil
		}
		used[k] += b
		n -= b
	}
	return used, k, nil
}

// tarSeqEndAll closes everything a finished connection held.
func (c *conn) tarSeqEndAll() {
	c.mu.Lock()
	iters, handles := c.tarseq.iters, c.tarseq.handles
	c.tarseq.iters, c.tarseq.handles = nil, nil
	c.mu.Unlock()
	for _, ti := range iters {
		ti.it.Close()
	}
	for _, h := range handles {
		h.seq.Close()
	}
}
