// Package prefetch holds the prefetch order of package stream as pure
// decisions, without I/O, goroutines or clocks: which shards a consumer
// fetches ahead of its position, how far, how many, and where it resumes
// after a fetch was refused for room. stream.Iterator runs it against the
// cache; package sim runs the same code on a virtual clock.
package prefetch

import "math"

// Walk is one prefetcher's position in its consumer's plan. A consumer's
// plan is a list of positions (samples, in the order it reads them); the
// walk goes through it ahead of the consumer and names the shards to
// fetch. The zero value is not ready: use New. A Walk is not safe for
// concurrent use.
type Walk struct {
	// Window is how many positions ahead of the consumer the walk goes
	// (stream's Predownload).
	Window int64

	next  int64 // the next position to look at
	last  int   // the shard of the last position looked at (-1: none)
	retry int64 // the earliest refused position not yet resumed (-1: none)
	// ahead holds the positions of shards fetched that the consumer has
	// not reached yet, ascending.
	ahead []int64
	head  int
}

// New returns a walk at the start of a plan.
func New(window int64) *Walk {
	return &Walk{Window: window, last: -1, retry: -1}
}

// Reset moves the walk back to the start of a (new) plan, keeping Window.
func (w *Walk) Reset() {
	w.next, w.last, w.retry, w.ahead, w.head = 0, -1, -1, w.ahead[:0], 0
}

// Refuse notes that the fetch of the shard first seen at position at was
// refused for lack of room (everything in the cache is needed sooner).
// The walk names nothing more until the next Sync, which resumes from the
// earliest refused position.
func (w *Walk) Refuse(at int64) {
	if w.retry < 0 || at < w.retry {
		w.retry = at
	}
}

// Refused reports whether a refusal stops the walk until the next Sync.
func (w *Walk) Refused() bool { return w.retry >= 0 }

// Sync moves the walk to the consumer's position pos (the next position
// it reads): a refused fetch is retried from its position, positions the
// consumer passed are not looked at, and the shards fetched ahead that it
// reached stop counting against the budget. It returns how many did.
func (w *Walk) Sync(pos int64) (reached int) {
	if w.retry >= 0 {
		if w.retry < w.next {
			w.next, w.last = w.retry, -1
		}
		w.retry = -1
	}
	if w.next < pos {
		w.next, w.last = pos, -1
	}
	for w.head < len(w.ahead) && w.ahead[w.head] < pos {
		w.head++
		reached++
	}
	if w.head == len(w.ahead) {
		w.ahead, w.head = w.ahead[:0], 0
	}
	return reached
}

// Ahead returns the number of shards fetched ahead that the consumer has
// not reached.
func (w *Walk) Ahead() int { return len(w.ahead) - w.head }

// Plan is what a walk reads of the consumer's plan and of the cache.
type Plan interface {
	// ShardAt returns the shard at position p and the end of its run (a
	// position > p; every position in [p, end) is in that shard); ok is
	// false for padding (then [p, end) is skipped).
	ShardAt(p int64) (shard int, end int64, ok bool)
	// Present reports whether the shard is in the cache or on its way.
	Present(shard int) bool
	// Stop reports whether the prefetcher may not start a fetch now (all
	// its fetch slots are busy, or its owner stops it).
	Stop() bool
}

// Next returns the next shard to fetch and the position where the walk
// met it: the first shard not present in [the walk's position, pos +
// Window), limited to the plan's known length n, while fewer than budget
// fetched shards are ahead of the consumer and no refusal stops the walk.
// ok is false when there is none now. The caller fetches it and calls
// Fetched(at).
func (w *Walk) Next(p Plan, pos, n int64, budget int) (at int64, shard int, ok bool) {
	end := n
	if w.Window < math.MaxInt64-pos {
		end = min(end, pos+w.Window)
	}
	for w.next < end && w.Ahead() < budget && w.retry < 0 && !p.Stop() {
		at = w.next
		sh, e, ok := p.ShardAt(at)
		w.next = max(e, at+1)
		if !ok || sh == w.last {
			continue
		}
		w.last = sh
		if p.Present(sh) {
			continue
		}
		return at, sh, true
	}
	return 0, 0, false
}

// Pos returns the next plan position the walk looks at: every shard it
// names from now on lies at or after it.
func (w *Walk) Pos() int64 { return w.next }

// Fetched counts the fetch of the shard met at position at (from Next)
// against the budget until the consumer reaches at.
func (w *Walk) Fetched(at int64) {
	w.ahead = append(w.ahead, at)
}

// Budget returns how many shards one of consumers prefetchers may hold
// fetched ahead of its consumer: its share of a cache of limit bytes
// after the index files (indexBytes) and, for every consumer, its current
// shard and one fetch, in shards of the largest footprint foot. Without a
// limit (or shard sizes) it is unbounded.
func Budget(limit, indexBytes, foot int64, consumers int) int {
	if limit == 0 || foot == 0 {
		return math.MaxInt
	}
	consumers = max(consumers, 1)
	slots := int((limit-indexBytes)/foot) - 2*consumers
	return max(slots/consumers, 0)
}

// FirstBudget is the budget of a consumer whose first sample is not out
// yet: only the shard of that sample, so that the time to first sample is
// one shard's download and not a share of many.
func FirstBudget(budget int) int { return min(budget, 1) }

// FirstEnd is the plan length a walk is given (Next's n) while its
// consumer's first sample is not out: the end of the run of the first
// sample at or after from (where the consumer's reading begins), so that
// the walk names that sample's shard and nothing past it. A consumer that
// waits for its first shard has moved past its first position, which
// no longer counts ahead of it: without this bound FirstBudget let the
// walk fetch the next shard too, and whether it did depended on whether
// the consumer or its prefetcher came first. It returns n when no sample
// lies in [from, n).
func FirstEnd(p Plan, from, n int64) int64 {
	for at := from; at < n; {
		_, end, ok := p.ShardAt(at)
		if ok {
			return min(max(end, at+1), n)
		}
		at = max(end, at+1)
	}
	return n
}

// DefaultWindow is the window (stream's Predownload) when none is set:
// MosaicML's 8 × batch size samples (64 without a batch size), widened to
// 2 × conc shards of shardSamples samples each (the dataset's average)
// when that is more; at most math.MaxInt32.
//
// Twice conc, not conc: a window of exactly conc shards starts the next
// fetch only when the consumer leaves its shard, so while it waits for
// the head of the window the fetches behind it that ended leave their
// slots idle (BenchmarkColdS3 at 4 MB shards: 4-5 downloads in flight of
// 8 on average). With conc more shards of room the slots stay busy
// while the head is late.
func DefaultWindow(batchSize, conc int, shardSamples int64) int {
	n := int64(64)
	if batchSize > 0 {
		n = 8 * int64(batchSize)
	}
	c := int64(conc)
	if c <= 0 {
		c = 8
	}
	c = min(c, math.MaxInt64/2) * 2
	w := int64(math.MaxInt32) // the bound: no index or option overflows it
	if shardSamples < w/c {
		w = c * shardSamples
	}
	return int(min(max(n, w), math.MaxInt32))
}
