// Package agent is the per-node Sluice daemon: one process that owns the
// node's cache and prefetching and serves every training process on the
// node (all local ranks, all their DataLoader workers, several jobs) over a
// Unix socket, with the protocol of package agentapi (docs/protocol.md).
//
// The agent adds serving, not logic: each opened dataset is a
// stream.Dataset, and an iteration is the same plan-ordered stream of
// leased sample locations a Go consumer gets. Clients receive the location
// (shard file, offset, length) and read the record from the cached file
// themselves, so large samples cross with at most one copy.
//
// # Lifecycle
//
// The live agent holds an flock on agent.lock in its directory (see
// AcquireLock); the kernel drops it when the process dies, so nothing left
// behind blocks the next start. Whoever holds the lock re-creates the
// socket. Serve returns after IdleTimeout without connections.
//
// # Connections
//
// Everything a client holds (dataset handles, iterations, leased batches)
// belongs to its connection: when the connection closes, for whatever
// reason, all of it is released.
package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"github.com/sluicedata/sluice/agentapi"
	"github.com/sluicedata/sluice/cache"
	"github.com/sluicedata/sluice/metrics"
	"github.com/sluicedata/sluice/plan"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/retry"
	"github.com/sluicedata/sluice/stream"
)

// Defaults of Options.
const (
	DefaultIdleTimeout = 2 * time.Minute
	DefaultWait        = 5 * time.Second
	DefaultMaxBatch    = 4096
)

// Options configures an Agent. A nil *Options means the defaults.
type Options struct {
	// Registry resolves remote URLs. Nil means only local paths work.
	Registry *storage.Registry
	// Logger receives the agent's log; nil discards it.
	Logger *slog.Logger
	// IdleTimeout is how long Serve keeps running without any connection
	// (0 means DefaultIdleTimeout; negative means forever).
	IdleTimeout time.Duration
	// Wait bounds how long a next request waits for its first sample
	// before answering with an empty batch (0 means DefaultWait). Clients
	// then ask again, so their own read deadlines stay short.
	Wait time.Duration
	// MaxBatch caps the samples of one reply (0 means DefaultMaxBatch).
	MaxBatch int
	// Retry is the retry policy of every store the agent's datasets read
	// (stream.Options.Retry); nil means the defaults.
	Retry *retry.Options
	// StoreMetrics times the requests of every store the agent opens for
	// a dataset, through Registry or with a job's own store settings
	// (agentapi.Open.Env), below the retry decorators, under the name the
	// agent's per-rank figures give the dataset (MetricsSnapshot); the
	// metrics request answers with them (agentapi.Metrics.Store). Nil
	// means the agent's own; the command's --metrics-addr passes the one
	// it serves.
	StoreMetrics *metrics.Store
}

// Agent serves datasets to clients. Create it with New, run it with Serve.
// It is safe for concurrent use.
type Agent struct {
	opts Options
	log  *slog.Logger

	// mu guards the fields below.
	mu       sync.Mutex
	datasets map[string]*sharedDataset // by dataset identity
	jobs     map[string]*job           // by job + dataset identity
	conns    map[*conn]struct{}
	gone     *sync.Cond    // broadcast (with mu) when a connection is released
	idle     chan struct{} // signalled when conns drops to zero
	closed   bool
	samples  int64 // samples served, for stats
	// retiredRanks holds the counters of the cursors of jobs that ended, per
	// dataset and rank (metrics.go): a rank's counters go on from them
	// instead of falling when one of the jobs reading it ends.
	retiredRanks map[metricsKey]metrics.Rank
	// opening holds, by a token of each (openSeq), the cache directories
	// (cacheDirs) of the datasets being opened outside mu
	// (acquireDataset): another remote's dataset is refused them while
	// the open, which writes the index there, runs (reuse.go).
	opening map[uint64]map[string]string
	openSeq uint64

	// cacheMu guards caches: one cache.Cache per cache root, shared by
	// every dataset under it.
	cacheMu sync.Mutex
	caches  map[string]*cache.Cache
	retired []*cache.Cache // caches whose directory was removed; closed at shutdown
	// cacheMemory is the cache.Options.Memory of the caches the agent
	// opens: 0 (none) but in BenchmarkAgentColdS3. The agent's clients
	// read the shard files once committed, and a file written from
	// memory with direct I/O is not in the page cache: they read it from
	// the disk. Measured there, against the server of
	// .ci/with-services.sh at load 3-5: 68% of the files' rate with as
	// much CPU or more, at 4 and 16 MB shards.
	cacheMemory int64

	// pool keeps the stores open for the agent's lifetime (see bucketPool);
	// registry opens through it. Both nil without Options.Registry.
	pool     *bucketPool
	registry *storage.Registry

	// retries counts the retries of every store the agent opens (its
	// datasets' policy is Options.Retry hooked by it).
	retries retry.Counts

	// tarseq records the readers of tar sequences (tarseq.go).
	tarseq tarSeqJobs
}

// New returns an Agent.
func New(opts *Options) (*Agent, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.Wait <= 0 {
		o.Wait = DefaultWait
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &Agent{
		opts:     o,
		log:      log,
		datasets: map[string]*sharedDataset{},
		jobs:     map[string]*job{},
		conns:    map[*conn]struct{}{},
		idle:     make(chan struct{}, 1),
		caches:   map[string]*cache.Cache{},
	}
	a.gone = sync.NewCond(&a.mu)
	a.opts.Retry = a.retries.Hook(o.Retry)
	if a.opts.StoreMetrics == nil {
		a.opts.StoreMetrics = metrics.NewStore()
	}
	if o.Registry != nil {
		a.pool = &bucketPool{base: o.Registry, instrument: a.opts.StoreMetrics.Bucket}
		a.registry = a.pool.registry()
	}
	return a, nil
}

// Serve accepts connections on ln until ctx is cancelled or the agent has
// been idle (no connection) for IdleTimeout. It closes ln, waits for the
// connections' goroutines to finish and releases every dataset before it
// returns. A cancelled ctx or an idle exit returns nil. An Agent serves
// once: after Serve returns it refuses new datasets.
func (a *Agent) Serve(ctx context.Context, ln net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer func() {
		cancel()
		ln.Close()
		a.mu.Lock()
		for c := range a.conns {
			c.nc.Close()
		}
		a.mu.Unlock()
		wg.Wait()
		a.closeDatasets()
	}()

	wg.Add(1)
	go func() {
		defer wg.Done()
		a.watchIdle(ctx, cancel)
	}()
	// Start idle: with no client ever connecting, the idle timer runs.
	a.signalIdle()
	// Unblock Accept when the agent stops (cancelled or idle).
	stopAccept := context.AfterFunc(ctx, func() { ln.Close() })
	defer stopAccept()

	for {
		nc, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("agent: accept: %w", err)
		}
		c := a.addConn(nc)
		if c == nil {
			nc.Close()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.serveConn(ctx, c)
		}()
	}
}

// watchIdle stops the agent after IdleTimeout without connections.
func (a *Agent) watchIdle(ctx context.Context, stop context.CancelFunc) {
	if a.opts.IdleTimeout < 0 {
		<-ctx.Done()
		return
	}
	timer := time.NewTimer(a.opts.IdleTimeout)
	timer.Stop()
	for {
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-a.idle:
			timer.Reset(a.opts.IdleTimeout)
		case <-timer.C:
			a.mu.Lock()
			n := len(a.conns)
			a.mu.Unlock()
			if n == 0 {
				a.log.Info("idle timeout, exiting", "idle", a.opts.IdleTimeout)
				stop()
				return
			}
		}
	}
}

func (a *Agent) signalIdle() {
	select {
	case a.idle <- struct{}{}:
	default:
	}
}

func (a *Agent) addConn(nc net.Conn) *conn {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil
	}
	c := newConn(a, nc)
	a.conns[c] = struct{}{}
	return c
}

func (a *Agent) removeConn(c *conn) {
	a.mu.Lock()
	delete(a.conns, c)
	n := len(a.conns)
	a.gone.Broadcast()
	a.mu.Unlock()
	if n == 0 {
		a.signalIdle()
	}
}

func (a *Agent) closeDatasets() {
	a.mu.Lock()
	a.closed = true
	ds, jobs := a.datasets, a.jobs
	a.datasets, a.jobs = map[string]*sharedDataset{}, map[string]*job{}
	a.mu.Unlock()
	for _, j := range jobs {
		a.closeJob(j)
	}
	for _, d := range ds {
		if err := d.ds.Close(); err != nil {
			a.log.Warn("close dataset", "err", err)
		}
	}
	a.cacheMu.Lock()
	defer a.cacheMu.Unlock()
	for dir, c := range a.caches {
		if err := c.Close(); err != nil {
			a.log.Warn("close cache", "dir", dir, "err", err)
		}
	}
	a.caches = map[string]*cache.Cache{}
	for _, c := range a.retired {
		if err := c.Close(); err != nil {
			a.log.Warn("close cache", "dir", c.Dir(), "err", err)
		}
	}
	a.retired = nil
	if a.pool != nil {
		if err := a.pool.close(); err != nil {
			a.log.Warn("close stores", "err", err)
		}
	}
}

// acquireDataset opens the dataset or takes another reference to it.
func (a *Agent) acquireDataset(ctx context.Context, key string, spec agentapi.Dataset, env jobEnv) (*sharedDataset, error) {
	a.mu.Lock()
	if d, ok := a.datasets[key]; ok {
		if c := d.opts.Cache; c == nil || !cacheGone(c) {
			d.refs++
			a.mu.Unlock()
			return d, nil
		}
		// Its cache directory was removed: a new open builds it again;
		// the old one closes with its last handle.
		delete(a.datasets, key)
	}
	if err := a.reusedLocal(spec); err != nil {
		a.mu.Unlock()
		return nil, err
	}
	tok := a.claimDirs(spec)
	a.mu.Unlock()
	// Open outside the lock: it may download the index. Two openers may
	// race; the loser closes its copy.
	d, err := a.openDataset(ctx, key, spec, env)
	a.mu.Lock()
	delete(a.opening, tok)
	if err != nil {
		a.mu.Unlock()
		return nil, err
	}
	if prev, ok := a.datasets[key]; ok {
		prev.refs++
		a.mu.Unlock()
		d.ds.Close()
		return prev, nil
	}
	if err := a.reusedLocal(spec); err != nil {
		// Another remote's dataset took the directory while this one
		// opened.
		a.mu.Unlock()
		d.ds.Close()
		return nil, err
	}
	if a.closed {
		a.mu.Unlock()
		d.ds.Close()
		return nil, &agentapi.Error{Code: agentapi.CodeClosed, Message: "agent is shutting down"}
	}
	d.refs = 1
	a.datasets[key] = d
	a.mu.Unlock()
	return d, nil
}

// releaseDataset drops one reference and closes the dataset with the last.
func (a *Agent) releaseDataset(d *sharedDataset) {
	a.mu.Lock()
	d.refs--
	last := d.refs == 0 && a.datasets[d.key] == d
	if last {
		delete(a.datasets, d.key)
	}
	a.mu.Unlock()
	if last {
		if err := d.ds.Close(); err != nil {
			a.log.Warn("close dataset", "err", err)
		}
	}
}

// job is the shared state of the consumers of one job on one dataset: a
// cursor (a stream.Dataset with its own epoch counter, MosaicML's
// next_epoch) per (rank, worker), and the newest epoch each rank started.
type job struct {
	key string
	ds  *sharedDataset
	// The fields below are guarded by Agent.mu.
	conns   int // handles open on the job
	closed  bool
	cursors map[[2]int]*stream.Dataset
	started map[int]plan.EpochSpec
	// group is where the job's DataLoader workers take their turns
	// (stream.WorkerGroup; used with OrderAdmissions).
	group *stream.WorkerGroup
	// rounds is the epoch each rank's workers are playing (rounds.go).
	rounds map[int]*epochRound
}

func (a *Agent) acquireJob(key string, ds *sharedDataset) *job {
	a.mu.Lock()
	defer a.mu.Unlock()
	j, ok := a.jobs[key]
	if !ok {
		j = &job{key: key, ds: ds, cursors: map[[2]int]*stream.Dataset{}, started: map[int]plan.EpochSpec{},
			group: stream.NewWorkerGroup()}
		a.jobs[key] = j
		ds.refs++ // the job's cursors share ds (see cursor); released with the job
	}
	j.conns++
	return j
}

// releaseJob drops one handle; the job's state goes with the last one, so
// a later run of the same job starts at epoch 0 as a fresh MosaicML run
// does.
func (a *Agent) releaseJob(j *job) {
	a.mu.Lock()
	j.conns--
	last := j.conns == 0 && a.jobs[j.key] == j
	if last {
		delete(a.jobs, j.key)
	}
	a.mu.Unlock()
	if last {
		a.closeJob(j)
		a.releaseDataset(j.ds)
	}
}

func (a *Agent) closeJob(j *job) {
	a.mu.Lock()
	j.closed = true
	cursors := j.cursors
	j.cursors = map[[2]int]*stream.Dataset{}
	a.retireLocked(j, cursors)
	a.mu.Unlock()
	for _, c := range cursors {
		if err := c.Close(); err != nil {
			a.log.Warn("close cursor", "err", err)
		}
	}
}

func (a *Agent) noteStarted(j *job, rank int, spec plan.EpochSpec) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if cur, ok := j.started[rank]; !ok || spec.Epoch >= cur.Epoch {
		j.started[rank] = spec
	}
}

func (a *Agent) stats() agentapi.Stats {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := agentapi.Stats{
		Op:          agentapi.OpStats,
		PID:         os.Getpid(),
		Connections: len(a.conns),
		Datasets:    len(a.datasets),
		Jobs:        len(a.jobs),
		Samples:     a.samples,
	}
	for c := range a.conns {
		n, l := c.counts()
		s.Iterations += n
		s.Leases += l
	}
	a.cacheMu.Lock()
	for _, c := range a.caches {
		s.Downloads += c.Stats().Downloads
	}
	a.cacheMu.Unlock()
	return s
}

// errorReply classifies err for the wire.
func errorReply(err error) agentapi.Error {
	code := agentapi.CodeInternal
	var ae *agentapi.Error
	switch {
	case errors.As(err, &ae):
		code = ae.Code
	case errors.Is(err, errBadRequest):
		code = agentapi.CodeBadRequest
	case errors.Is(err, agentapi.ErrInvalid):
		code = agentapi.CodeInvalid // e.g. a feed transform's parameters
	case errors.Is(err, agentapi.ErrCorrupt):
		code = agentapi.CodeCorrupt // e.g. a feed transform's bad image
	case errors.Is(err, storage.ErrChecksum):
		code = agentapi.CodeCorrupt // damaged on every download attempt
	case errors.Is(err, storage.ErrNotExist):
		code = agentapi.CodeNotFound
	case errors.Is(err, storage.ErrPermission):
		code = agentapi.CodePermission
	case errors.Is(err, context.DeadlineExceeded):
		code = agentapi.CodeTimeout
	case errors.Is(err, io.ErrUnexpectedEOF):
		code = agentapi.CodeCorrupt
	default:
		code = classify(err)
	}
	return agentapi.Error{Op: agentapi.OpError, Code: code, Message: err.Error()}
}

var errBadRequest = errors.New("bad request")

func badRequestf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errBadRequest}, args...)...)
}
