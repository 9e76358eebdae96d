package sim

import (
	"container/heap"
	"math"

	"github.com/sluicedata/sluice/plan"
)

// Shard states in a node's cache.
const (
	absent uint8 = iota
	inFlight
	present
)

// node is one node's cache and prefetchers on the virtual clock. Times
// are seconds since the run began.
type node struct {
	c     *Config
	id    int
	bw    float64 // bytes/s, 0 = unlimited
	lat   float64
	limit int64
	conc  int // concurrent prefetches of the node (consumers × per consumer)

	// per shard
	state   []uint8
	doneAt  []float64
	lastUse []float64
	leased  []int32 // step lease count
	demand  []bool  // in-flight fetch is a demand fetch
	pidx    []int32 // index in presentList, -1 if absent

	presentList []int
	nextUse     []int64 // per shard, its next use at or after pos (cached)

	usage, peak int64
	// gen counts changes that can make room (completions, evictions,
	// releases); noRoomGen/noRoomDist remember the last refused prefetch.
	gen, noRoomGen int64
	noRoomDist     int64
	linkFree       float64
	events         eventHeap
	prefetching    int

	// the epoch being played
	sc       *plan.Schedule
	runs     []plan.ShardRun
	nextRun  int   // the prefetcher's walk position (index into runs)
	retry    bool  // a prefetch was refused for space: walk again from retryRun on progress
	retryAt  int   // run to retry from
	ahead    []int // runs fetched ahead by the prefetcher, not reached yet
	pos      int64
	window   int64
	horizon  int64
	budget   int
	out      bool  // first batch delivered
	stepRun  int   // first run overlapping the current step
	cur      []int // shards leased by the current step
	firstPos []int64

	// figures
	bytes, requests, downloads, evictions int64
	hits, misses, overLimit               int64
	workerFree                            []float64
	rep                                   NodeReport
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
		conc:  c.concurrency() * c.consumers(),
		state: make([]uint8, n), doneAt: make([]float64, n), lastUse: make([]float64, n),
		leased: make([]int32, n), demand: make([]bool, n), pidx: make([]int32, n),
		workerFree: make([]float64, c.Shape.WorkersPerRank),
	}
	for i := range nd.pidx {
		nd.pidx[i] = -1
	}
	nd.noRoomGen = -1
	nd.window = int64(c.predownload()) * int64(c.consumers())
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

// prefetchBudget is stream's per-consumer budget (Dataset.prefetchBudget)
// times the consumers: the shards the node's prefetchers may hold ahead.
func prefetchBudget(c *Config, consumers int) int {
	if c.CacheLimit == 0 {
		return math.MaxInt
	}
	var foot int64
	for _, s := range c.Dataset.Shards {
		foot = max(foot, s.Footprint)
	}
	if foot == 0 {
		return math.MaxInt
	}
	consumers = max(consumers, 1)
	slots := int((c.CacheLimit-c.Dataset.IndexBytes)/foot) - 2*consumers
	return max(slots/consumers, 0) * consumers
}

// unknownUse marks a next use not computed yet this epoch.
const unknownUse = -2

// beginEpoch installs the epoch's schedule.
func (nd *node) beginEpoch(sc *plan.Schedule, firstPos []int64) {
	nd.sc = sc
	if nd.nextUse == nil {
		nd.nextUse = make([]int64, len(nd.state))
	}
	for i := range nd.nextUse {
		nd.nextUse[i] = unknownUse
	}
	nd.runs = sc.Runs()
	nd.nextRun, nd.retry, nd.ahead, nd.pos, nd.out, nd.stepRun = 0, false, nd.ahead[:0], 0, false, 0
	nd.firstPos = firstPos
	for i := range nd.workerFree {
		nd.workerFree[i] = 0
	}
}

// advance processes the downloads that complete up to t.
func (nd *node) advance(t float64) {
	for len(nd.events) > 0 && nd.events[0].at <= t {
		ev := heap.Pop(&nd.events).(event)
		nd.complete(ev.shard)
		nd.pump(ev.at)
	}
}

func (nd *node) complete(shard int) {
	sh := &nd.c.Dataset.Shards[shard]
	nd.state[shard] = present
	nd.usage += sh.CachedBytes - sh.Footprint
	nd.pidx[shard] = int32(len(nd.presentList))
	nd.presentList = append(nd.presentList, shard)
	if !nd.demand[shard] {
		nd.prefetching--
	}
	nd.demand[shard] = false
	nd.gen++
}

// fetch starts a download of shard at t.
func (nd *node) fetch(shard int, t float64, demand bool) {
	sh := &nd.c.Dataset.Shards[shard]
	nd.state[shard] = inFlight
	nd.demand[shard] = demand
	if !demand {
		nd.prefetching++
	}
	nd.usage += sh.Footprint
	nd.peak = max(nd.peak, nd.usage)
	end := nd.transferEnd(t, sh.StoredBytes)
	nd.doneAt[shard] = end
	nd.bytes += sh.StoredBytes
	nd.requests += int64(sh.Files)
	nd.downloads += int64(sh.Files)
	heap.Push(&nd.events, event{at: end, shard: shard})
}

// distance is the cache's view of a shard's next use: planned within the
// consumers' look-ahead horizon, or not planned.
func (nd *node) distance(shard int) (int64, bool) {
	// The first use at or after an earlier position is still the first
	// use at or after this one while it is not behind it (uses ascend).
	u := nd.nextUse[shard]
	if u == unknownUse || (u >= 0 && u < nd.pos) {
		u = nd.sc.NextUse(shard, nd.pos)
		nd.nextUse[shard] = u
	}
	if u < 0 || u-nd.pos > nd.horizon {
		return 0, false
	}
	return u - nd.pos, true
}

// reserve makes room for n bytes as cache.reserve does: it evicts unleased
// present shards, unplanned ones first (least recently used first), then
// the planned ones whose next use is farthest; a prefetch evicts only
// shards needed later than its own (distance). It reports whether the
// bytes fit.
func (nd *node) reserve(n, distance int64, demand bool) bool {
	if nd.limit == 0 || nd.usage+n <= nd.limit {
		return true
	}
	if !demand && nd.noRoomGen == nd.gen && distance >= nd.noRoomDist {
		// As the cache: a prefetch needed no sooner than one just
		// refused, with nothing changed since, is refused without a scan.
		return false
	}
	// Evict the best candidate, one at a time (usually one is enough):
	// unplanned before planned, then the farthest next use, then the
	// least recently used.
	for nd.usage+n > nd.limit {
		best, bestPlanned, bestDist, bestLast := -1, true, int64(-1), 0.0
		for _, s := range nd.presentList {
			if nd.leased[s] > 0 {
				continue
			}
			d, planned := nd.distance(s)
			if !planned {
				d = math.MaxInt64
			}
			better := best < 0 ||
				(bestPlanned && !planned) ||
				(bestPlanned == planned && (d > bestDist ||
					(d == bestDist && (nd.lastUse[s] < bestLast || (nd.lastUse[s] == bestLast && s < best)))))
			if better {
				best, bestPlanned, bestDist, bestLast = s, planned, d, nd.lastUse[s]
			}
		}
		if best < 0 || (!demand && bestDist <= distance) {
			break
		}
		nd.evict(best)
	}
	if nd.usage+n > nd.limit {
		if !demand && (nd.noRoomGen != nd.gen || distance < nd.noRoomDist) {
			nd.noRoomGen, nd.noRoomDist = nd.gen, distance
		}
		return false
	}
	return true
}

func (nd *node) evict(shard int) {
	nd.usage -= nd.c.Dataset.Shards[shard].CachedBytes
	nd.state[shard] = absent
	i := nd.pidx[shard]
	last := nd.presentList[len(nd.presentList)-1]
	nd.presentList[i] = last
	nd.pidx[last] = i
	nd.presentList = nd.presentList[:len(nd.presentList)-1]
	nd.pidx[shard] = -1
	nd.evictions++
	nd.gen++
}

// pump runs the prefetchers at t: walk the node's runs from the walk
// position within the window ahead of the consumers, fetching absent
// shards while the concurrency and the cache budget allow.
func (nd *node) pump(t float64) {
	if nd.sc == nil || nd.retry {
		return
	}
	budget := nd.budget
	if !nd.out {
		// Until its first sample is out a consumer fetches only one
		// shard (its first sample's, for a single consumer).
		budget = min(budget, len(nd.firstPos))
	}
	for nd.nextRun < len(nd.runs) && nd.runs[nd.nextRun].Start < nd.pos+nd.window &&
		len(nd.ahead) < budget && nd.prefetching < nd.conc {
		r := nd.runs[nd.nextRun]
		if nd.state[r.Shard] != absent {
			nd.nextRun++
			continue
		}
		dist := max(r.Start-nd.pos, 0)
		if !nd.reserve(nd.c.Dataset.Shards[r.Shard].Footprint, dist, false) {
			nd.retry, nd.retryAt = true, nd.nextRun
			return
		}
		nd.fetch(r.Shard, t, false)
		nd.ahead = append(nd.ahead, nd.nextRun)
		nd.nextRun++
	}
}

// progress moves the consumers to position pos at t (a step begins).
func (nd *node) progress(pos int64, t float64) {
	nd.pos = pos
	if nd.retry {
		nd.retry = false
		nd.nextRun = min(nd.nextRun, nd.retryAt)
	}
	for nd.nextRun < len(nd.runs) && nd.runs[nd.nextRun].Start+nd.runs[nd.nextRun].Len <= pos {
		nd.nextRun++
	}
	k := 0
	for k < len(nd.ahead) && nd.runs[nd.ahead[k]].Start+nd.runs[nd.ahead[k]].Len <= pos {
		k++
	}
	nd.ahead = nd.ahead[k:]
	nd.pump(t)
}

// step plays step s beginning at t (the previous step's end): the
// consumers move to the step's first sample, lease the step's shards
// (demand-fetching the absent ones) and the step's batches are decoded.
// It returns when the node's batch for step s is ready.
func (nd *node) step(s int, t float64) float64 {
	nd.advance(t)
	lo, hi := nd.sc.StepStart(s), nd.sc.StepStart(s+1)
	nd.release()
	for nd.stepRun < len(nd.runs) && nd.runs[nd.stepRun].Start+nd.runs[nd.stepRun].Len <= lo {
		nd.stepRun++
	}
	nd.progress(lo, t)
	ready := t
	for i := nd.stepRun; i < len(nd.runs) && nd.runs[i].Start < hi; i++ {
		sh := nd.runs[i].Shard
		switch nd.state[sh] {
		case present:
			if nd.doneAt[sh] <= t {
				nd.hits++
			} else {
				nd.misses++
			}
		case inFlight:
			nd.misses++
		case absent:
			nd.misses++
			nd.demandFetch(sh, t)
		}
		ready = math.Max(ready, nd.doneAt[sh])
		nd.lastUse[sh] = t
		// The consumer holds a lease on the shard it reads; the last
		// shard of the step stays leased into the next.
		if nd.runs[i].Start+nd.runs[i].Len >= hi {
			nd.leased[sh]++
			nd.cur = append(nd.cur, sh)
		}
	}
	nd.advance(ready)
	// DataLoader worker s%W decodes the batch once its shards are there.
	w := s % len(nd.workerFree)
	dec := nd.c.DecodeCost.Seconds() * float64(hi-lo) / float64(nd.c.Shape.RanksPerNode)
	done := math.Max(ready, nd.workerFree[w]) + dec
	nd.workerFree[w] = done
	if !nd.out {
		nd.out = true
		nd.pump(ready)
	}
	return done
}

// demandFetch fetches an absent shard the consumer needs now, waiting
// for in-flight downloads to make room when the cache is full (as a
// demand reservation waits for space).
func (nd *node) demandFetch(sh int, t float64) {
	n := nd.c.Dataset.Shards[sh].Footprint
	for !nd.reserve(n, 0, true) && len(nd.events) > 0 {
		ev := heap.Pop(&nd.events).(event)
		nd.complete(ev.shard)
		t = math.Max(t, ev.at)
	}
	if nd.limit > 0 && nd.usage+n > nd.limit {
		nd.overLimit++
	}
	nd.fetch(sh, t, true)
}

// release gives back the current step's leases.
func (nd *node) release() {
	for _, sh := range nd.cur {
		nd.leased[sh]--
	}
	nd.gen++
	nd.cur = nd.cur[:0]
}
