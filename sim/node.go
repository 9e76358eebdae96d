package sim

import (
	"github.com/sluicedata/sluice/cache"
	"github.com/sluicedata/sluice/plan"
	"github.com/sluicedata/sluice/stream/prefetch"
)

// Shard states in a node's cache.
const (
	absent uint8 = iota
	inFlight
	present
)

// node is one node's cache and prefetchers on the virtual clock. Times
// are seconds since the run began. The decisions are the real code's: the
// eviction choice, its limits and the refusal of prefetches are package
// cache's policy (cache.CompareCandidates, cache.MayEvict, cache.Refusals);
// the prefetch order, window and budget are package prefetch's Walk, one
// per consumer over its own order as stream.Iterator runs it (consumer).
// What the node adds is the clock, the store link and
// the bookkeeping the real code keeps in files and goroutines.
type node struct {
	c     *Config
	id    int
	bw    float64 // bytes/s, 0 = unlimited
	lat   float64
	limit int64

	// Shards are numbered per node (local), in the order the node first
	// meets them, so that the per-shard tables hold only the node's
	// shards, close together (a node reads ~1/20 of the seed's): gid is
	// each local shard's index in the dataset, lid the reverse (-1: not
	// met yet), shards its sizes. Every table below is by local shard.
	gid    []int32
	lid    []int32
	shards []Shard

	// per shard
	state   []uint8
	arr     []arrival // when each shard's last fetch completes (flush)
	bursts  int64     // bursts numbered so far
	lastUse []int64   // clock at the last use (the cache's LRU clock)
	leased  []int32   // step lease count
	demand  []bool    // in-flight fetch is a demand fetch
	// owners holds, per in-flight shard, the consumers whose prefetchers
	// hold a fetch slot on it: the one that started it (a shard on its way
	// counts as present to the walks, as cache.Dataset.Coming to stream's).
	owners [][]int32
	use    []int64 // a candidate's next use at or after pos (-1: none)
	// pinned counts, where the workers take turns, the consumers whose
	// walk fetched the shard and whose turn has not leased it yet
	// (cache.Pinner): no candidate until then.
	pinned []int32

	vic victims // eviction candidates in the policy's order
	// tracking is set from the first reservation that must evict: until
	// then vic is empty and its upkeep skipped (a cache that never fills
	// costs nothing).
	tracking bool
	clock    int64

	usage, peak int64
	// gen counts changes that can make room (completions, releases), as
	// the cache's signals; refusals remembers the last refused prefetch.
	gen      int64
	refusals cache.Refusals
	linkFree float64
	events   eventHeap
	// pending holds the fetches started but not yet on the link (flush).
	pending []pend

	// the epoch being played
	sc       *plan.Schedule
	runs     []shardRun
	nextSame []int32 // per run: the next run of its shard (-1: none)
	runAt    []int32 // per shard: a run of it at or before its next use (-1: none)
	// consumed marks the runs a consumer has read (with read-ahead, ahead
	// of pos): a shard's next use is its next run not read yet.
	consumed    []bool
	anyConsumed bool
	cons        []consumer
	wake        []int32 // consumers whose fetch slot freed, to pump
	waitOut     int     // consumers whose first sample is not out
	// single is set when the node has one consumer: the position the
	// eviction measures next uses from is then that consumer's, the start
	// of the run of the shard it reads (an Iterator's), not the step's.
	single   bool
	perRank  int     // consumers per rank
	partRun  []int32 // per step and rank: the run of the part's start
	useRun   int     // first run whose shard's next use may be behind pos
	hzRun    int     // first run beyond the look-ahead horizon
	pos      int64
	horizon  int64
	budget   int      // one consumer's prefetch budget
	stepRun  int      // first run overlapping the current step
	cur      []leases // shards leased by the steps read, a ring by step
	begun    int      // the next step whose chains are not begun
	chains   []chain
	readHeap []int32 // readByHeap's heap of chain indices
	// With ordered admissions (turns.go): per rank, the earliest next
	// shard change of its begun chains and when its last turn was taken.
	minTurn []int64
	turnT   []float64
	// Per consumer, where the workers take turns: whether it has an
	// unfinished begun chain, and else its next turn (waitingTurns).
	busy    []bool
	waiting []turnMemo
	// readUntil's, per rank: its chains' indices and its next read.
	rankChains [][]int32
	rankBest   []rankRead
	turns      bool     // the workers take turns (takesTurns)
	win        []window // per consumer, where the workers take turns (window.go)
	wl         []wlist  // per shard, its runs inside the consumers' windows (window.go)
	rpos       []int64  // per consumer, its runPos (for turnKey)
	maxRpos    int64    // the largest of rpos
	// turnHz is one consumer's look-ahead in samples, as
	// stream.Iterator's horizon (twice the predownload, at least 1024).
	turnHz int64

	// figures
	bytes, requests, downloads, evictions int64
	hits, misses, overLimit               int64
	// workerFree is when each DataLoader worker is done with its last
	// batch; taken is when the training loop took each of the last
	// readAhead batches (a ring by step), epochStart when the epoch's
	// loop began.
	workerFree []float64
	taken      []float64
	epochStart float64
	rep        NodeReport
}

func newNode(c *Config, id int) *node {
	nd := &node{
		c: c, id: id, bw: c.bandwidth(c.Shape.Nodes), lat: c.Store.Latency.Seconds(), limit: c.CacheLimit,
		lid:        make([]int32, len(c.Dataset.Shards)),
		workerFree: make([]float64, c.Shape.WorkersPerRank),
		taken:      make([]float64, max(c.readAhead(), 1)),
		cur:        make([]leases, c.Shape.WorkersPerRank+2),
	}
	for i := range nd.lid {
		nd.lid[i] = -1
	}
	if c.shardsInOrder {
		for g := range nd.lid {
			nd.local(g)
		}
	}
	nd.turns = takesTurns(c)
	if nd.turns {
		nd.turnHz = int64(max(2*c.predownload(), 1024))
	}
	nd.horizon = int64(max(2*c.predownload(), 1024)) * int64(c.consumers())
	nd.budget = prefetchBudget(c, c.consumers())
	// The index is fetched (or built from the shards' headers) first and
	// stays in the cache, with its ETag stamp.
	nd.usage = c.Dataset.IndexBytes + c.Dataset.IndexStampBytes
	nd.peak = nd.usage
	nd.requests = int64(c.indexRequests())
	nd.bytes = c.Dataset.openBytes()
	nd.linkFree = nd.transferEnd(0, nd.bytes)
	for range c.indexRequests() - 1 {
		nd.linkFree = nd.transferEnd(nd.linkFree, 0)
	}
	return nd
}

// prefetchBudget is stream's per-consumer budget (prefetch.Budget): the
// shards one consumer's prefetcher may hold ahead of it.
func prefetchBudget(c *Config, consumers int) int {
	var foot int64
	for _, s := range c.Dataset.Shards {
		foot = max(foot, s.Footprint)
	}
	return prefetch.Budget(c.CacheLimit, c.Dataset.IndexBytes, foot, consumers)
}

// beginEpoch installs the epoch's schedule.
func (nd *node) beginEpoch(sc *plan.Schedule) {
	nd.sc = sc
	nd.runs = nd.shardRuns(sc, nd.runs)
	nd.nextSame = nextSame(nd.runs, nd.runAt, nd.nextSame)
	if cap(nd.consumed) < len(nd.runs) {
		nd.consumed = make([]bool, len(nd.runs))
	}
	nd.consumed = nd.consumed[:len(nd.runs)]
	clear(nd.consumed)
	nd.anyConsumed = false
	nd.useRun, nd.hzRun, nd.pos, nd.stepRun = 0, 0, 0, 0
	// The last epoch's prefetches in flight belong to its iterators.
	for i := range nd.owners {
		nd.owners[i] = nd.owners[i][:0]
	}
	nd.wake = nd.wake[:0]
	clear(nd.turnT)
	clear(nd.waiting) // the epoch's runs are new
	nd.newConsumers()
	if nd.turns {
		nd.resetWindows()
	}
	for i := range nd.workerFree {
		nd.workerFree[i] = 0
	}
	all := nd.vic.all()
	for _, s := range all {
		nd.use[s] = sc.NextUse(int(nd.gid[s]), 0)
	}
	for _, s := range all {
		nd.vic.set(int(s), nd.candidate(int(s)))
	}
}

// local returns the local number of dataset shard g, numbering it and
// growing the per-shard tables when the node meets it first.
func (nd *node) local(g int) int {
	if l := nd.lid[g]; l >= 0 {
		return int(l)
	}
	l := len(nd.gid)
	nd.lid[g] = int32(l)
	nd.gid = append(nd.gid, int32(g))
	nd.shards = append(nd.shards, nd.c.Dataset.Shards[g])
	nd.state = append(nd.state, absent)
	nd.arr = append(nd.arr, arrival{})
	nd.lastUse = append(nd.lastUse, 0)
	nd.leased = append(nd.leased, 0)
	nd.demand = append(nd.demand, false)
	nd.owners = append(nd.owners, nil)
	nd.use = append(nd.use, 0)
	nd.pinned = append(nd.pinned, 0)
	nd.runAt = append(nd.runAt, -1)
	nd.vic.add(int32(g))
	return l
}

// shardRun is a run of consecutive positions of the node's order in one
// shard (plan.ShardRun) in 12 bytes instead of 24: positions fit an int32
// (plan.Schedule's), and the shard is the node's local number.
type shardRun struct {
	start, n, shard int32
}

// Start is the position of the run's first sample.
func (r shardRun) Start() int64 { return int64(r.start) }

// Len is the run's sample count.
func (r shardRun) Len() int64 { return int64(r.n) }

// Shard is the run's shard (local).
func (r shardRun) Shard() int { return int(r.shard) }

// shardRuns returns sc's maximal runs of one shard in order (as
// Schedule.Runs), numbering their shards (local), in buf when it is
// large enough.
func (nd *node) shardRuns(sc *plan.Schedule, buf []shardRun) []shardRun {
	n := sc.Len()
	count, prev := 0, -1
	for p := range n {
		if g := sc.ShardAt(p); g != prev {
			count++
			prev = g
		}
	}
	out := buf[:0]
	if cap(out) < count {
		out = make([]shardRun, 0, count)
	}
	prev = -1
	for p := range n {
		g := sc.ShardAt(p)
		if g == prev {
			out[len(out)-1].n++
			continue
		}
		prev = g
		out = append(out, shardRun{start: int32(p), n: 1, shard: int32(nd.local(g))})
	}
	return out
}

// nextSame returns, per run, the index of the next run of the same shard
// (-1: none), in buf when it is large enough, and fills first with each
// shard's first run (-1: none).
func nextSame(runs []shardRun, first []int32, buf []int32) []int32 {
	out := buf[:0]
	if cap(out) < len(runs) {
		out = make([]int32, len(runs))
	}
	out = out[:len(runs)]
	for i := range first {
		first[i] = -1
	}
	for i := len(runs) - 1; i >= 0; i-- {
		sh := runs[i].Shard()
		out[i] = first[sh]
		first[sh] = int32(i)
	}
	return out
}

// progress moves the node to step s, beginning at node position pos, at
// t: the eviction's view of the next uses follows it. The consumers' walks
// move when each takes a new shard (read), as an Iterator's; at the
// epoch's first step every walk starts.
func (nd *node) progress(s int, pos int64, t float64) {
	if !nd.single || s == 0 {
		// A node's one consumer moves the position itself (read).
		nd.pos = pos
		nd.moved()
	}
	if s != 0 || nd.ordered() {
		return // taking turns, each walk starts in its first turn
	}
	t += nd.c.workerStart() // a DataLoader worker's first request
	for i := range nd.cons {
		cs := &nd.cons[i]
		cs.walk.Sync(cs.pos)
		nd.pump(i, t)
	}
}

// release gives back the leases of step (every one with step < 0): the
// consumer that read it moved on. The leases are kept by step in a ring
// (the steps holding leases are fewer than its length: a step's are
// released when its consumer begins its next batch).
func (nd *node) release(step int) {
	for i := range nd.cur {
		l := &nd.cur[i]
		if len(l.shards) == 0 || (step >= 0 && l.step != step) {
			continue
		}
		for _, sh := range l.shards {
			nd.leased[sh]--
			nd.offer(sh)
		}
		l.shards = l.shards[:0]
	}
	nd.gen++
}

// lease holds the shards a step's reads keep leased into the next step.
func (nd *node) lease(step, shard int) {
	l := &nd.cur[step%len(nd.cur)]
	if l.step != step && len(l.shards) > 0 {
		// Not released yet (a step that outlived the ring): release it.
		nd.release(l.step)
	}
	l.step = step
	l.shards = append(l.shards, shard)
}
