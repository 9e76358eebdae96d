package cache

import "math"

// This file is the cache's eviction policy as pure decisions, without I/O
// or locks: Cache.evict and Cache.reserve follow it on the directory, and
// package sim plays it on a virtual clock. A rule changed here changes
// both.

// Class is an eviction candidate's kind; lower classes are evicted first.
type Class int8

const (
	// Unplanned is a shard no registered consumer (Future) reports within
	// its look-ahead.
	Unplanned Class = iota
	// Foreign is a shard of a dataset only other processes registered:
	// its plan is not known here.
	Foreign
	// Planned is a shard a consumer will read within its look-ahead.
	Planned
)

// Far is the distance of an Unplanned or Foreign candidate: farther than
// any planned use.
const Far int64 = math.MaxInt64

// Candidate is a shard that may be evicted (present, not leased, not
// being fetched, not local-only data), as the policy sees it.
type Candidate struct {
	// Class is the candidate's kind.
	Class Class
	// Dist is the distance in samples to its next planned use (Far unless
	// Planned). Only differences matter to CompareCandidates: distances
	// all measured from another common origin order the same.
	Dist int64
	// LastUse orders candidates of equal class and distance: least
	// recently used first (any clock that ascends with use).
	LastUse int64
}

// NewCandidate returns the candidate of a shard whose next planned use is
// dist samples away (planned false: no consumer plans it).
func NewCandidate(planned bool, dist, lastUse int64) Candidate {
	if !planned {
		return Candidate{Class: Unplanned, Dist: Far, LastUse: lastUse}
	}
	return Candidate{Class: Planned, Dist: dist, LastUse: lastUse}
}

// CompareCandidates orders candidates for eviction (negative: a goes
// first): unplanned before foreign before planned; among planned, the
// farthest next use first (Belady's rule); then the least recently used.
// Candidates it finds equal keep their given order (a stable sort).
func CompareCandidates(a, b Candidate) int {
	switch {
	case a.Class != b.Class:
		return int(a.Class) - int(b.Class)
	case a.Dist != b.Dist:
		if a.Dist > b.Dist {
			return -1
		}
		return 1
	case a.LastUse != b.LastUse:
		if a.LastUse < b.LastUse {
			return -1
		}
		return 1
	}
	return 0
}

// MayEvict reports whether a reservation may evict c: a demand fetch (the
// consumer waits for it) evicts any candidate; a prefetch for a shard
// needed distance samples ahead evicts only candidates needed later than
// that. Candidates come in CompareCandidates order, so the first refused
// ends the eviction.
func MayEvict(c Candidate, distance int64, demand bool) bool {
	return demand || c.Dist > distance
}

// Evictable reports whether a present shard is a candidate at all: a
// leased shard, one being fetched, or data that exists only locally is
// never evicted.
func Evictable(leased, fetching, localOnly bool) bool {
	return !leased && !fetching && !localOnly
}

// Refusals remembers the last prefetch refused for lack of room, so that
// a prefetch needed no sooner is refused without a rescan until something
// that can make room happens (gen, a counter the owner increments on
// completions, evictions and releases, changes). The zero value remembers
// nothing.
type Refusals struct {
	gen, dist int64
	set       bool
}

// Refused reports whether a prefetch distance samples ahead is refused at
// once at generation gen.
func (r *Refusals) Refused(gen, distance int64) bool {
	return r.set && r.gen == gen && distance >= r.dist
}

// Note records that a prefetch distance samples ahead was refused at
// generation gen (the sooner of two refusals of one generation is kept).
func (r *Refusals) Note(gen, distance int64) {
	if !r.set || r.gen != gen || distance < r.dist {
		r.gen, r.dist, r.set = gen, distance, true
	}
}

// Victims is a source of eviction candidates in CompareCandidates order,
// for Evict.
type Victims interface {
	// First returns the candidate to evict next (ok false: none left).
	First() (c Candidate, ok bool)
	// Evict evicts that candidate and returns the bytes freed (0 when it
	// could not be evicted after all); the next First is the one after.
	Evict() int64
}

// Evict evicts candidates from v in order until need bytes are freed, no
// candidate is left, or MayEvict refuses the next one, and returns the
// bytes freed. Cache.evict and the simulator both evict through it.
func Evict(v Victims, need, distance int64, demand bool) int64 {
	var freed int64
	for freed < need {
		c, ok := v.First()
		if !ok || !MayEvict(c, distance, demand) {
			break
		}
		freed += v.Evict()
	}
	return freed
}
