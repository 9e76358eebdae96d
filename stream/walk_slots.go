package stream

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/sluicedata/sluice/storage"
)

// fetchSlots bounds the downloads of one Iterator's prefetch walk under a
// cache limit (Options.PrefetchConcurrency at once) and starts them in the
// order the walk admitted them, apart from the walk itself.
//
// Under a limit the walk admits (reserves, or is refused room for) every
// shard its budget and window allow where the consumer moves, whatever
// number of its downloads are still running: the slots bound the downloads,
// not the walk. When the slots bounded the walk, what a walk at a shard
// change admitted depended on how many downloads had ended by then, and a
// walk ran again on a download's goroutine where it ended, seeing the
// consumer wherever it was by then; so what was fetched and evicted
// depended on the consumer's pace against the store's (the rank iterator
// with 2 slots at a 420 KB limit: 45 requests at a 30 ms step, 47 at 80
// ms, 46 now and then between; TestValidateAgainstS3's evicting-2-slots
// measured 46 against 45 once under load). Each admitted fetch takes a
// ticket; its download (its first GET) waits until every earlier ticket
// has a slot or ended and one is free, and frees it once its bytes are
// written. Package sim plays the same queue (consumer.queue).
type fetchSlots struct {
	mu   sync.Mutex
	free int64  // slots free
	next uint64 // the ticket served next
	n    uint64 // tickets handed out
	// gone holds tickets at or after next that ended without taking a
	// slot (their flight was another's, or ended before a GET).
	gone map[uint64]bool
	// open lets every download go: the iterator closed, and what it
	// admitted goes on without it (as a walk's fetches always did).
	open    bool
	changed chan struct{} // closed and replaced at each change
}

func newFetchSlots(n int64) *fetchSlots {
	return &fetchSlots{free: max(n, 1), gone: map[uint64]bool{}, changed: make(chan struct{})}
}

// Ticket states.
const (
	ticketWaiting = iota // no slot yet
	ticketHolding        // holds a slot
	ticketDone           // gave its slot back, or ended without one
)

// slotTicket is one admitted fetch's place in its walk's order.
type slotTicket struct {
	s     *fetchSlots
	n     uint64
	state int // under s.mu
}

// ticket returns the next ticket, in the order of the walk's admissions.
func (s *fetchSlots) ticket() *slotTicket {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := &slotTicket{s: s, n: s.n}
	s.n++
	return t
}

// signalLocked wakes every waiter. Call with mu held.
func (s *fetchSlots) signalLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// openAll lets every waiting and later download go (the iterator closed).
func (s *fetchSlots) openAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.open = true
	s.signalLocked()
}

// acquire waits until t may download: every earlier ticket took a slot or
// ended, and a slot is free (at once when t holds one already, which a
// fetch's later GETs do). The wait ends as a download ends (each bounded
// by the store's attempt timeouts), when the iterator closes (openAll),
// or with ctx (the cache's, cancelled at its Close).
func (t *slotTicket) acquire(ctx context.Context) error {
	s := t.s
	s.mu.Lock()
	for {
		for s.gone[s.next] {
			delete(s.gone, s.next)
			s.next++
		}
		switch {
		case t.state != ticketWaiting:
			s.mu.Unlock()
			return nil
		case s.open:
			t.state = ticketDone // no slot to give back
			s.gone[t.n] = true
			s.signalLocked()
			s.mu.Unlock()
			return nil
		case s.next == t.n && s.free > 0:
			s.free--
			s.next++
			t.state = ticketHolding
			s.signalLocked()
			s.mu.Unlock()
			return nil
		}
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("stream: waiting for a prefetch slot: %w", ctx.Err())
		}
		s.mu.Lock()
	}
}

// release gives t's slot back, or, where t never took one, lets the
// tickets after it pass its turn. Idempotent.
func (t *slotTicket) release() {
	s := t.s
	s.mu.Lock()
	defer s.mu.Unlock()
	switch t.state {
	case ticketHolding:
		s.free++
	case ticketWaiting:
		s.gone[t.n] = true
	default:
		return
	}
	t.state = ticketDone
	s.signalLocked()
}

// slotBucket is the store a walk's admitted fetch downloads through: its
// GETs wait for the fetch's ticket (fetchSlots).
type slotBucket struct {
	storage.Bucket
	t *slotTicket
}

func (b slotBucket) NewRangeReader(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	if err := b.t.acquire(ctx); err != nil {
		return nil, err
	}
	return b.Bucket.NewRangeReader(ctx, key, off, length)
}
