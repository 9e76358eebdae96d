package cache

import (
	"sync"
	"time"
)

// stashIdle is how long the stash keeps blocks that no Cache takes: then
// it drops them all, and the collector returns their memory.
const stashIdle = time.Minute

// blockStash holds the free blocks of closed Caches for the next Cache of
// the process (a job that opens one dataset after another, a benchmark's
// passes). A sync.Pool did this before, but the collector empties a pool
// within two cycles, and a pass that downloads hundreds of MB runs
// several: the next Cache found a part of the blocks gone and paid for
// fresh memory again (zeroing and page faults, 0.3-0.4 ms of CPU per MB
// on the test machine), and a pooled block of the wrong size was dropped
// where another would have fit. The stash keeps blocks until one is
// taken, at most the Memory of the Cache that gave them (so never more
// than a closed Cache was allowed to hold), and for stashIdle after its
// last use. Its zero value is an empty stash.
type blockStash struct {
	mu    sync.Mutex
	free  [][]byte // oldest first
	bytes int64    // of free
	timer *time.Timer
	// idleAfter replaces stashIdle when set (tests).
	idleAfter time.Duration
	// idle counts the idle timer's arms, so that a timer that fires
	// after a later use does nothing.
	idle uint64
}

// put adds blk, dropping the oldest blocks to keep at most limit bytes
// (blk itself when it is larger).
func (s *blockStash) put(blk []byte, limit int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := int64(len(blk))
	if n > limit {
		return
	}
	for s.bytes+n > limit && len(s.free) > 0 {
		s.bytes -= int64(len(s.free[0]))
		s.free[0] = nil
		s.free = s.free[1:]
	}
	s.free = append(s.free, blk)
	s.bytes += n
	s.armLocked()
}

// take removes and returns the smallest block that fits, of at most
// room bytes, or nil.
func (s *blockStash) take(fits func([]byte) bool, room int64) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	best := -1
	for i, b := range s.free {
		if fits(b) && int64(len(b)) <= room && (best < 0 || len(b) < len(s.free[best])) {
			best = i
		}
	}
	if best < 0 {
		return nil
	}
	b := s.free[best]
	s.free = append(s.free[:best], s.free[best+1:]...)
	s.bytes -= int64(len(b))
	s.armLocked()
	return b
}

// armLocked (re)starts the idle timer. Call under s.mu.
func (s *blockStash) armLocked() {
	s.idle++
	if len(s.free) == 0 {
		if s.timer != nil {
			s.timer.Stop()
		}
		return
	}
	if s.timer != nil {
		s.timer.Stop()
	}
	gen, after := s.idle, s.idleAfter
	if after <= 0 {
		after = stashIdle
	}
	s.timer = time.AfterFunc(after, func() { s.expire(gen) })
}

// expire drops every block when no put or take came after the arm gen.
func (s *blockStash) expire(gen uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if gen != s.idle {
		return
	}
	s.free, s.bytes = nil, 0
}

// held returns the bytes the stash holds.
func (s *blockStash) held() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes
}
