package sim

import "math"

// This file is a node's store link: the fetches started, put on the link
// in order (flush), their completions (advance, complete) and the demand
// fetch that waits for room.

// pend is a fetch started at t by consumer origin, not yet placed on the
// link.
type pend struct {
	shard  int
	t      float64
	origin int32
}

// event is a fetch's completion: when, and the shard (local, and its
// index in the dataset, which orders completions at one time).
type event struct {
	at         float64
	shard, gid int32
}

// eventHeap is a binary heap of completions, earliest first (ties by the
// shard's index in the dataset).
type eventHeap []event

func (h eventHeap) less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].gid < h[j].gid
}

// push adds e.
func (h *eventHeap) push(e event) {
	*h = append(*h, e)
	q := *h
	for i := len(q) - 1; i > 0; {
		p := (i - 1) / 2
		if !q.less(i, p) {
			break
		}
		q[i], q[p] = q[p], q[i]
		i = p
	}
}

// pop removes and returns the earliest completion (the heap is not empty).
func (h *eventHeap) pop() event {
	q := *h
	e := q[0]
	n := len(q) - 1
	q[0] = q[n]
	q = q[:n]
	for i := 0; ; {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && q.less(r, l) {
			m = r
		}
		if !q.less(m, i) {
			break
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
	*h = q
	return e
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

// advance processes the downloads that complete up to t.
func (nd *node) advance(t float64) {
	for nd.flush(); len(nd.events) > 0 && nd.events[0].at <= t; nd.flush() {
		ev := nd.events.pop()
		nd.complete(int(ev.shard), ev.at)
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

// complete ends shard's download at t.
func (nd *node) complete(shard int, t float64) {
	sh := &nd.shards[shard]
	nd.state[shard] = present
	nd.usage += sh.CachedBytes - sh.Footprint
	for _, o := range nd.owners[shard] {
		nd.cons[o].prefetching--
		if nd.slotted() {
			// The freed slot starts the walk's next admitted fetch; the
			// walk itself runs where its consumer moves.
			nd.startQueued(int(o), t)
		} else {
			nd.wake = append(nd.wake, o)
		}
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
	nd.admitFetch(shard, demand)
	nd.pending = append(nd.pending, pend{shard: shard, t: t, origin: int32(origin)})
}

// admitFetch counts the download of shard (its room is reserved) without
// putting it on the link: its completion is unknown until flush.
func (nd *node) admitFetch(shard int, demand bool) {
	sh := &nd.shards[shard]
	nd.state[shard] = inFlight
	nd.demand[shard] = demand
	nd.usage += sh.Footprint
	nd.peak = max(nd.peak, nd.usage)
	nd.arr[shard] = arrival{done: math.Inf(1)}
	nd.bytes += sh.StoredBytes
	nd.requests += sh.requests()
	nd.downloads += int64(sh.Files)
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
			e = nd.transferEnd(p[j].t, nd.shards[p[j].shard].StoredBytes)
			if j == i {
				first = e
			}
			sum += e
		}
		a := arrival{done: sum / float64(j-i), first: first, last: e, id: nd.bursts, k: int32(j - i)}
		nd.bursts++
		for k := i; k < j; k++ {
			nd.arr[p[k].shard] = a
			nd.events.push(event{at: a.done, shard: int32(p[k].shard), gid: nd.gid[p[k].shard]})
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

// demandFetch fetches an absent shard the consumer needs now, waiting
// for in-flight downloads to make room when the cache is full (as a
// demand reservation waits for space).
func (nd *node) demandFetch(sh int, t float64, origin int) {
	n := nd.shards[sh].Footprint
	for nd.flush(); !nd.reserve(n, 0, true) && len(nd.events) > 0; nd.flush() {
		ev := nd.events.pop()
		nd.complete(int(ev.shard), ev.at)
		t = math.Max(t, ev.at)
	}
	if nd.limit > 0 && nd.usage+n > nd.limit {
		nd.overLimit++
	}
	nd.fetch(sh, t, true, origin)
}
