package cache

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"
)

// Order admits the turns of a group of consumers one at a time, in an
// order that their plan defines, not their scheduling: the DataLoader
// workers of one rank, whose shard changes (the release of one shard and
// the lease or fetch of the next) decide what the cache holds, evicts and
// downloads. Each member has a next turn, named by a key (a position in an
// order of the rank's samples that the plan sets, see stream's
// WorkerGroup); a member's
// turn at key k comes once every other member's next turn is later (by
// key, then by member), so the cache's state at each decision is a
// function of the plan.
//
// No wait is unbounded: a member that has not moved for the order's
// patience (a consumer that stopped reading, one never started) is passed
// over until it moves again, and a member that ends or is closed leaves.
// The zero value is not usable: see NewOrder. An Order is safe for
// concurrent use.
type Order struct {
	patience time.Duration
	now      func() time.Time

	mu sync.Mutex
	m  []member
	// deferred holds the actions of turns no member waits for (Defer),
	// in no particular order.
	deferred []*deferredTurn
}

// member is one consumer of an Order.
type member struct {
	next    int64 // its next turn's key (-1 before it joins; math.MaxInt64: none)
	moved   time.Time
	left    bool
	stalled bool // passed over (see Wait) until it moves
	// waiting is set while the member waits for its turn at next, woken
	// through wake (signal) when nothing holds it back any more.
	waiting bool
	wake    chan struct{}
}

type deferredTurn struct {
	key     int64
	who     int
	fn      func()
	running bool
	done    bool
}

// NoTurn is the key of a member with no more turns.
const NoTurn int64 = math.MaxInt64

// NewOrder returns an order over members consumers, numbered from 0, none
// of which has joined yet: until a member's first turn (Wait), every
// other member's turn waits for it (up to patience; a non-positive
// patience means 5 s).
func NewOrder(members int, patience time.Duration) *Order {
	if patience <= 0 {
		patience = 5 * time.Second
	}
	o := &Order{patience: patience, now: time.Now, m: make([]member, max(members, 0))}
	t := o.now()
	for i := range o.m {
		o.m[i] = member{next: -1, moved: t, wake: make(chan struct{}, 1)}
	}
	return o
}

// Members returns the number of members.
func (o *Order) Members() int { return len(o.m) }

// before reports whether turn (k1, w1) comes before (k2, w2).
func before(k1 int64, w1 int, k2 int64, w2 int) bool {
	return k1 < k2 || (k1 == k2 && w1 < w2)
}

// blocked reports whether turn (key, who) must wait, and when the member
// holding it longest will have been still for the patience; members that
// have been still that long are marked passed over. Call with mu held.
func (o *Order) blocked(key int64, who int, now time.Time) (bool, time.Time) {
	var wake time.Time
	wait := false
	for i := range o.m {
		mb := &o.m[i]
		if i == who || mb.left || mb.stalled || before(key, who, mb.next, i) {
			continue
		}
		if due := mb.moved.Add(o.patience); !now.Before(due) {
			mb.stalled = true
			continue
		}
		if due := mb.moved.Add(o.patience); !wait || due.Before(wake) {
			wake = due
		}
		wait = true
	}
	for _, d := range o.deferred {
		if before(d.key, d.who, key, who) {
			// An earlier deferred turn not run (or running) yet: it waits
			// for a member that also holds this one, or ends soon.
			if !wait {
				wake = now.Add(o.patience)
			}
			wait = true
		}
	}
	return wait, wake
}

// signal wakes the waiters whose turn has come after a change: not every
// waiter, so that a turn passes to the next member without the others
// waking to find theirs still held (8 workers changing shards at most
// samples, py1e, made a hand-off wake all 7 waiters). While a deferred
// turn waits to run every waiter is woken (one of them runs it, see
// Wait). A waiter still held wakes by itself when a member holding it
// has been still for the patience (its timer). Call with mu held.
func (o *Order) signal() {
	all := false
	for _, d := range o.deferred {
		if !d.running {
			all = true
			break
		}
	}
	now := o.now()
	for i := range o.m {
		mb := &o.m[i]
		if !mb.waiting {
			continue
		}
		if !all {
			if wait, _ := o.blocked(mb.next, i, now); wait {
				continue
			}
		}
		select {
		case mb.wake <- struct{}{}:
		default:
		}
	}
}

// Wait waits for member who's turn at key: until no other member's next
// turn comes before it, every earlier deferred turn has run, and members
// still for the order's patience are passed over. The turn lasts until
// Done; key must not be below who's last. It fails only when ctx ends,
// and then who has left.
func (o *Order) Wait(ctx context.Context, who int, key int64) error {
	if who < 0 || who >= len(o.m) {
		return fmt.Errorf("cache: order member %d out of range [0, %d)", who, len(o.m))
	}
	o.mu.Lock()
	mb := &o.m[who]
	if mb.left {
		o.mu.Unlock()
		return nil // no order left to keep
	}
	mb.next, mb.moved, mb.stalled = key, o.now(), false
	o.signal()
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		run := o.takeDeferred()
		if len(run) > 0 {
			o.mu.Unlock()
			o.runDeferred(run)
			o.mu.Lock()
			continue
		}
		wait, wake := o.blocked(key, who, o.now())
		if !wait {
			mb.waiting = false
			o.mu.Unlock()
			return nil
		}
		mb.waiting = true
		ch := mb.wake
		o.mu.Unlock()
		d := wake.Sub(o.now())
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		select {
		case <-ch:
		case <-timer.C:
		case <-ctx.Done():
			o.mu.Lock()
			mb.waiting = false
			o.mu.Unlock()
			o.Leave(who)
			return fmt.Errorf("cache: waiting for the turn of consumer %d at %d: %w", who, key, ctx.Err())
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		o.mu.Lock()
	}
}

// Done ends who's turn: its next turn is at next (NoTurn: none). Outside
// a turn it announces who's next turn (a member that joins, or that
// learns where its next turn is).
func (o *Order) Done(who int, next int64) {
	if who < 0 || who >= len(o.m) {
		return
	}
	o.mu.Lock()
	mb := &o.m[who]
	if !mb.left {
		mb.next, mb.moved, mb.stalled = next, o.now(), false
	}
	run := o.takeDeferred()
	o.signal()
	o.mu.Unlock()
	o.runDeferred(run)
}

// Defer schedules who's turn at key without waiting for it, and who has
// no turn after it: fn runs once that turn comes (on the goroutine of the
// member whose move brings it, or at once on this one). A consumer at the
// end of its plan releases its last shard so, where it must not wait for
// the others (they may need the training loop to take its batches first).
func (o *Order) Defer(who int, key int64, fn func()) {
	if who < 0 || who >= len(o.m) {
		fn()
		return
	}
	o.mu.Lock()
	mb := &o.m[who]
	if mb.left {
		o.mu.Unlock()
		fn()
		return
	}
	mb.next, mb.moved, mb.stalled = NoTurn, o.now(), false
	o.deferred = append(o.deferred, &deferredTurn{key: key, who: who, fn: fn})
	run := o.takeDeferred()
	o.signal()
	o.mu.Unlock()
	o.runDeferred(run)
}

// Leave removes who from the order: it has no more turns, and its deferred
// turn, if any, runs now.
func (o *Order) Leave(who int) {
	if who < 0 || who >= len(o.m) {
		return
	}
	o.mu.Lock()
	mb := &o.m[who]
	mb.left, mb.next = true, NoTurn
	var run []*deferredTurn
	for _, d := range o.deferred {
		if d.who == who && !d.running {
			d.running = true
			run = append(run, d)
		}
	}
	run = append(run, o.takeDeferred()...)
	o.signal()
	o.mu.Unlock()
	o.runDeferred(run)
}

// takeDeferred marks the deferred turns that have come as running and
// returns them, earliest first. Call with mu held.
func (o *Order) takeDeferred() []*deferredTurn {
	var run []*deferredTurn
	now := o.now()
	for {
		var first *deferredTurn
		for _, d := range o.deferred {
			if !d.running && (first == nil || before(d.key, d.who, first.key, first.who)) {
				first = d
			}
		}
		if first == nil {
			return run
		}
		if wait, _ := o.blocked(first.key, first.who, now); wait {
			// blocked counts the deferred turns running: only members
			// hold it back if none is.
			held := false
			for i := range o.m {
				mb := &o.m[i]
				if i != first.who && !mb.left && !mb.stalled && !before(first.key, first.who, mb.next, i) {
					held = true
				}
			}
			if held {
				return run
			}
		}
		first.running = true
		run = append(run, first)
	}
}

// runDeferred runs taken deferred turns in order and drops them.
func (o *Order) runDeferred(run []*deferredTurn) {
	if len(run) == 0 {
		return
	}
	for _, d := range run {
		d.fn()
	}
	o.mu.Lock()
	for _, d := range run {
		d.done = true
	}
	k := 0
	for _, d := range o.deferred {
		if !d.done {
			o.deferred[k] = d
			k++
		}
	}
	clear(o.deferred[k:])
	o.deferred = o.deferred[:k]
	o.signal()
	o.mu.Unlock()
}
