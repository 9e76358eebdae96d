package sim

import (
	"container/heap"
	"math"
	"sort"

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
	runs     []plan.ShardRun
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
	turns   bool        // the workers take turns (takesTurns)
	dist    []int64     // orderedVictims' distances, per shard
	lv      listVictims // orderedVictims' list

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

// pend is a fetch started at t by consumer origin, not yet placed on the
// link.
type pend struct {
	shard  int
	t      float64
	origin int32
}

type event struct {
	at    float64
	shard int
}

type eventHeap []event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].shard < h[j].shard
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(event)) }
func (h *eventHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func newNode(c *Config, id int) *node {
	n := len(c.Dataset.Shards)
	nd := &node{
		c: c, id: id, bw: c.bandwidth(c.Shape.Nodes), lat: c.Store.Latency.Seconds(), limit: c.CacheLimit,
		state: make([]uint8, n), arr: make([]arrival, n), lastUse: make([]int64, n),
		leased: make([]int32, n), demand: make([]bool, n), use: make([]int64, n),
		owners:     make([][]int32, n),
		runAt:      make([]int32, n),
		vic:        newVictims(n),
		workerFree: make([]float64, c.Shape.WorkersPerRank),
		taken:      make([]float64, max(c.readAhead(), 1)),
		cur:        make([]leases, c.Shape.WorkersPerRank+2),
	}
	nd.turns = takesTurns(c)
	nd.horizon = int64(max(2*c.predownload(), 1024)) * int64(c.consumers())
	nd.budget = prefetchBudget(c, c.consumers())
	// The index is fetched first and stays in the cache.
	nd.usage = c.Dataset.IndexBytes
	nd.peak = nd.usage
	nd.requests = int64(c.indexRequests())
	nd.bytes = c.Dataset.IndexBytes
	nd.linkFree = nd.transferEnd(0, c.Dataset.IndexBytes)
	for range c.indexRequests() - 1 {
		nd.linkFree = nd.transferEnd(nd.linkFree, 0)
	}
	return nd
}

// transferEnd returns when a request of b bytes sent at t completes, and
// occupies the link until then.
func (nd *node) transferEnd(t float64, b int64) float64 {
	start := math.Max(t+nd.lat, nd.linkFree)
	end := start
	if nd.bw > 0 {
		end += float64(b) / nd.bw
	}
	nd.linkFree = end
	return end
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
	nd.runs = sc.Runs()
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
	nd.newConsumers()
	for i := range nd.workerFree {
		nd.workerFree[i] = 0
	}
	all := nd.vic.all()
	for _, s := range all {
		nd.use[s] = sc.NextUse(int(s), 0)
	}
	for _, s := range all {
		nd.vic.set(int(s), nd.candidate(int(s)))
	}
}

// nextSame returns, per run, the index of the next run of the same shard
// (-1: none), in buf when it is large enough.
// nextSame returns, per run, the index of the next run of the same shard
// (-1: none), in buf when it is large enough, and fills first with each
// shard's first run (-1: none).
func nextSame(runs []plan.ShardRun, first []int32, buf []int32) []int32 {
	out := buf[:0]
	if cap(out) < len(runs) {
		out = make([]int32, len(runs))
	}
	out = out[:len(runs)]
	for i := range first {
		first[i] = -1
	}
	for i := len(runs) - 1; i >= 0; i-- {
		sh := runs[i].Shard
		out[i] = first[sh]
		first[sh] = int32(i)
	}
	return out
}

// candidate returns a candidate shard's key for the policy: planned when a
// consumer uses it within its look-ahead horizon (what stream.Iterator
// reports to the cache as a Future), its Dist the absolute next use (see
// victims).
func (nd *node) candidate(shard int) cache.Candidate {
	u := nd.use[shard]
	return cache.NewCandidate(u >= 0 && u-nd.pos <= nd.horizon, u, nd.lastUse[shard])
}

// offer makes an unleased present shard a candidate.
func (nd *node) offer(shard int) {
	if !nd.tracking {
		return
	}
	if nd.state[shard] != present || !cache.Evictable(nd.leased[shard] > 0, false, false) {
		return
	}
	nd.use[shard] = nd.nextUse(shard, nd.pos)
	nd.vic.set(shard, nd.candidate(shard))
}

// nextUse is the plan's next use of shard at or after pos (the
// consumers' position, which only grows in an epoch), passing over the
// runs a consumer has read already (-1: none): the start of the first run
// of the shard not read that ends after pos, or pos inside it. Each
// shard's cursor (runAt) moves along its runs (nextSame) as pos grows.
func (nd *node) nextUse(shard int, pos int64) int64 {
	runs := nd.runs
	k := nd.runAt[shard]
	for k >= 0 && runs[k].Start+runs[k].Len <= pos {
		k = nd.nextSame[k]
	}
	nd.runAt[shard] = k
	return nd.unread(int(k), pos)
}

// unread returns the start (at least pos) of run k or, if read, of the
// next run of its shard not read (-1: none).
func (nd *node) unread(k int, pos int64) int64 {
	for k >= 0 && k < len(nd.runs) && nd.consumed[k] {
		k = int(nd.nextSame[k])
	}
	if k < 0 || k >= len(nd.runs) {
		return -1
	}
	return max(nd.runs[k].Start, pos)
}

// moved updates the candidates' keys after the consumers moved to pos:
// the next use of shards whose use is now behind, and the class of shards
// that came into the horizon.
func (nd *node) moved() {
	if !nd.tracking {
		return
	}
	runs, pos := nd.runs, nd.pos
	for ; nd.useRun < len(runs) && runs[nd.useRun].Start < pos; nd.useRun++ {
		r := runs[nd.useRun]
		if !nd.vic.has(r.Shard) || nd.use[r.Shard] >= pos {
			if r.Start+r.Len > pos {
				break
			}
			continue
		}
		if r.Start+r.Len > pos {
			// Still in use: its next use moves with pos.
			nd.use[r.Shard] = nd.unread(nd.useRun, pos)
			nd.vic.set(r.Shard, nd.candidate(r.Shard))
			break
		}
		// Passed: the next use is the start of the shard's next run not
		// read (the first use at or after pos: no run of it lies between).
		u := nd.unread(int(nd.nextSame[nd.useRun]), pos)
		if u >= 0 && u < pos {
			u = nd.nextUse(r.Shard, pos)
		}
		nd.use[r.Shard] = u
		nd.vic.set(r.Shard, nd.candidate(r.Shard))
	}
	for ; nd.hzRun < len(runs) && runs[nd.hzRun].Start-pos <= nd.horizon; nd.hzRun++ {
		if sh := runs[nd.hzRun].Shard; nd.vic.has(sh) && nd.vic.key[sh].Class != cache.Planned && nd.use[sh] >= 0 {
			nd.vic.set(sh, nd.candidate(sh))
		}
	}
}

// advance processes the downloads that complete up to t.
func (nd *node) advance(t float64) {
	for nd.flush(); len(nd.events) > 0 && nd.events[0].at <= t; nd.flush() {
		ev := heap.Pop(&nd.events).(event)
		nd.complete(ev.shard)
		nd.pumpWoken(ev.at)
	}
	nd.pumpWoken(t)
}

// pumpWoken pumps the consumers a completion concerned (a freed fetch
// slot, the first sample out) at t.
func (nd *node) pumpWoken(t float64) {
	if nd.ordered() {
		// Taking turns, the walks run in the turns alone.
		nd.wake = nd.wake[:0]
		return
	}
	for len(nd.wake) > 0 {
		ci := nd.wake[len(nd.wake)-1]
		nd.wake = nd.wake[:len(nd.wake)-1]
		nd.pump(int(ci), t)
	}
}

func (nd *node) complete(shard int) {
	sh := &nd.c.Dataset.Shards[shard]
	nd.state[shard] = present
	nd.usage += sh.CachedBytes - sh.Footprint
	for _, o := range nd.owners[shard] {
		nd.cons[o].prefetching--
		nd.wake = append(nd.wake, o)
	}
	nd.owners[shard] = nd.owners[shard][:0]
	nd.demand[shard] = false
	// A consumer whose first sample's shard this is has its first sample
	// out (a DataLoader worker reads its first batch at once).
	if nd.waitOut > 0 {
		for i := range nd.cons {
			if cs := &nd.cons[i]; !cs.out && cs.firstShard == shard {
				cs.out = true
				nd.waitOut--
				nd.wake = append(nd.wake, int32(i))
			}
		}
	}
	nd.gen++
	nd.offer(shard)
}

// fetch starts a download of shard at t for consumer origin. Its
// completion time is set by flush.
func (nd *node) fetch(shard int, t float64, demand bool, origin int) {
	sh := &nd.c.Dataset.Shards[shard]
	nd.state[shard] = inFlight
	nd.demand[shard] = demand
	nd.usage += sh.Footprint
	nd.peak = max(nd.peak, nd.usage)
	nd.arr[shard] = arrival{done: math.Inf(1)}
	nd.bytes += sh.StoredBytes
	nd.requests += int64(sh.Files)
	nd.downloads += int64(sh.Files)
	nd.pending = append(nd.pending, pend{shard: shard, t: t, origin: int32(origin)})
}

// flush puts the pending fetches on the link, in the order they were
// started. The fetches one consumer starts at one instant (its
// prefetcher's burst, its reader's demand fetch beside it) reach the store
// in an order that is a race in the real system (goroutines, connections,
// the store's own time to first byte): each of them completes at the mean
// of the burst's FIFO completions, its expected completion under a random
// order, and a reader that needs several of them waits for the expected
// last (waitFor). The bursts of different consumers at one instant (every
// worker's first shard at the start) go in the consumers' order: one race
// for them all made the seed scale's simultaneous bursts of 64 workers
// complete together, 25% more CPU. The link is busy until the last one as
// before.
func (nd *node) flush() {
	p := nd.pending
	for i := 0; i < len(p); {
		j, sum, first := i, 0.0, 0.0
		var e float64
		for ; j < len(p) && p[j].t == p[i].t && p[j].origin == p[i].origin; j++ {
			e = nd.transferEnd(p[j].t, nd.c.Dataset.Shards[p[j].shard].StoredBytes)
			if j == i {
				first = e
			}
			sum += e
		}
		a := arrival{done: sum / float64(j-i), first: first, last: e, id: nd.bursts, k: int32(j - i)}
		nd.bursts++
		for k := i; k < j; k++ {
			nd.arr[p[k].shard] = a
			heap.Push(&nd.events, event{at: a.done, shard: p[k].shard})
		}
		i = j
	}
	nd.pending = p[:0]
}

// arrival is when a shard's fetch completes (done: the mean of its burst's
// FIFO completions), and its burst: the k fetches started at one instant,
// numbered id, whose completions run from first to last.
type arrival struct {
	done, first, last float64
	id                int64
	k                 int32
}

// wait is when a reader that needs m of the fetches of burst a has them
// all, expected over the burst's random order: the last of m positions
// drawn from k is on average at m(k+1)/(m+1), its completion read off the
// burst's, taken evenly spaced from first to last (shards of one size; m
// = 1 gives their mean, done).
func (a *arrival) wait(m int) float64 {
	k := int(a.k)
	if m >= k {
		return a.last
	}
	if m <= 1 {
		return a.done
	}
	p := float64(m)*float64(k+1)/float64(m+1) - 1 // 0-based
	return a.first + p*(a.last-a.first)/float64(k-1)
}

// reserve makes room for n bytes as cache.Cache.reserve does, by the
// cache's policy: it evicts candidates in cache.CompareCandidates order
// while cache.MayEvict allows (a prefetch distance samples ahead evicts
// only shards needed later), and a prefetch needed no sooner than one just
// refused, with nothing changed since, is refused without a scan. It
// reports whether the bytes fit.
func (nd *node) reserve(n, distance int64, demand bool) bool {
	if nd.limit == 0 || nd.usage+n <= nd.limit {
		return true
	}
	if !demand && nd.refusals.Refused(nd.gen, distance) {
		return false
	}
	if nd.ordered() {
		// The workers take turns: the real cache's candidates exactly.
		cache.Evict(nd.orderedVictims(), nd.usage+n-nd.limit, distance, demand)
	} else {
		if !nd.tracking {
			nd.track()
		}
		cache.Evict(nodeVictims{nd}, nd.usage+n-nd.limit, distance, demand)
	}
	if nd.usage+n > nd.limit {
		if !demand {
			nd.refusals.Note(nd.gen, distance)
		}
		return false
	}
	return true
}

// nodeVictims is cache.Victims over the node's candidates; a planned
// candidate's distance is made relative to the consumers' position again.
type nodeVictims struct{ nd *node }

func (v nodeVictims) First() (cache.Candidate, bool) {
	s, ok := v.nd.vic.first()
	if !ok {
		return cache.Candidate{}, false
	}
	k := v.nd.vic.key[s]
	if k.Class == cache.Planned {
		k.Dist -= v.nd.pos
	}
	return k, true
}

func (v nodeVictims) Evict() int64 {
	nd := v.nd
	s, _ := nd.vic.first()
	if nd.c.onEvict != nil {
		nd.c.onEvict(nd, s)
	}
	b := nd.c.Dataset.Shards[s].CachedBytes
	nd.evict(s)
	return b
}

// track begins the upkeep of the candidates: every unleased present shard
// with its next use from pos, and the cursors of moved.
func (nd *node) track() {
	nd.tracking = true
	for sh := range nd.state {
		nd.offer(sh)
	}
	runs, pos := nd.runs, nd.pos
	nd.useRun = sort.Search(len(runs), func(k int) bool { return runs[k].Start+runs[k].Len > pos })
	nd.hzRun = sort.Search(len(runs), func(k int) bool { return runs[k].Start-pos > nd.horizon })
}

func (nd *node) evict(shard int) {
	nd.usage -= nd.c.Dataset.Shards[shard].CachedBytes
	nd.state[shard] = absent
	nd.vic.remove(shard)
	nd.evictions++
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

// demandFetch fetches an absent shard the consumer needs now, waiting
// for in-flight downloads to make room when the cache is full (as a
// demand reservation waits for space).
func (nd *node) demandFetch(sh int, t float64, origin int) {
	n := nd.c.Dataset.Shards[sh].Footprint
	for nd.flush(); !nd.reserve(n, 0, true) && len(nd.events) > 0; nd.flush() {
		ev := heap.Pop(&nd.events).(event)
		nd.complete(ev.shard)
		t = math.Max(t, ev.at)
	}
	if nd.limit > 0 && nd.usage+n > nd.limit {
		nd.overLimit++
	}
	nd.fetch(sh, t, true, origin)
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
