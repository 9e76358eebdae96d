package cache_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sluicedata/sluice/cache"
)

// TestOrderTurns plays three members whose turns interleave; each runs
// on its own goroutine, started in reverse order, and the turns must
// still be taken in key order.
func TestOrderTurns(t *testing.T) {
	o := cache.NewOrder(3, time.Minute)
	keys := [][]int64{{0, 3, 6, 7}, {1, 4, 8}, {2, 5, 9}}
	var mu sync.Mutex
	var got []int64
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for who := 2; who >= 0; who-- {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ks := keys[who]
			for i, k := range ks {
				if err := o.Wait(ctx, who, k); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				got = append(got, k)
				mu.Unlock()
				next := cache.NoTurn
				if i+1 < len(ks) {
					next = ks[i+1]
				}
				o.Done(who, next)
			}
		}()
		time.Sleep(5 * time.Millisecond) // later members first, as a race could have it
	}
	wg.Wait()
	for i, k := range got {
		if k != int64(i) {
			t.Fatalf("turns taken in order %v, want 0..9", got)
		}
	}
}

// TestOrderPassesOverStill checks that a member that never moves holds the
// others back for the order's patience once, not for ever: a worker that
// is never started, or stops reading.
func TestOrderPassesOverStill(t *testing.T) {
	o := cache.NewOrder(2, 50*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	for _, k := range []int64{1, 3, 5} {
		if err := o.Wait(ctx, 1, k); err != nil {
			t.Fatal(err)
		}
		o.Done(1, k+2)
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Errorf("member 1 went after %s: it did not wait for member 0 (never joined)", d)
	}
	// Member 0 joins late, behind: its turn comes at once.
	if err := o.Wait(ctx, 0, 0); err != nil {
		t.Fatal(err)
	}
	o.Done(0, 2)
	// And member 1 waits for it again.
	done := make(chan error, 1)
	go func() { done <- o.Wait(ctx, 1, 7) }()
	select {
	case err := <-done:
		t.Fatalf("member 1's turn at 7 came while member 0's at 2 was pending (%v)", err)
	case <-time.After(20 * time.Millisecond):
	}
	o.Leave(0)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestOrderDefer checks that a deferred turn runs when the turns before it
// are taken, before any later turn, without its member waiting.
func TestOrderDefer(t *testing.T) {
	o := cache.NewOrder(2, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	o.Done(1, 1) // member 1 announces its first turn
	if err := o.Wait(ctx, 0, 0); err != nil {
		t.Fatal(err)
	}
	o.Done(0, 10)
	if err := o.Wait(ctx, 1, 1); err != nil {
		t.Fatal(err)
	}
	o.Done(1, 11)
	ran := false
	o.Defer(0, 10, func() { ran = true }) // member 1's next (11) is later: runs now
	if !ran {
		t.Fatal("deferred turn at 10 did not run with every other turn later")
	}
	// A deferred turn before a pending one runs only once that one is
	// taken.
	o2 := cache.NewOrder(2, time.Minute)
	o2.Done(1, 7)
	if err := o2.Wait(ctx, 0, 0); err != nil {
		t.Fatal(err)
	}
	o2.Done(0, 5)
	ran = false
	o2.Defer(1, 7, func() { ran = true })
	if ran {
		t.Fatal("deferred turn at 7 ran while member 0's turn at 5 was pending")
	}
	if err := o2.Wait(ctx, 0, 5); err != nil {
		t.Fatal(err)
	}
	if ran {
		t.Fatal("deferred turn at 7 ran during member 0's turn at 5")
	}
	o2.Done(0, 9)
	if !ran {
		t.Fatal("deferred turn at 7 did not run once member 0 moved past it")
	}
}

// TestOrderContext checks that a wait ends with its context, naming what
// it waited for.
func TestOrderContext(t *testing.T) {
	o := cache.NewOrder(2, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err := o.Wait(ctx, 1, 5)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait = %v, want the context's deadline", err)
	}
	if err := o.Wait(context.Background(), 3, 0); err == nil {
		t.Error("member 3 of 2: no error")
	}
}

// TestOrderManyHandOffs plays 8 members over 2,400 interleaved keys, each
// member's last turn deferred (as an iterator's last release): every turn
// must be taken in key order, and each hand-off must wake the member
// whose turn came (a waiter left asleep would wait for the minute of
// patience, past the test's deadline), though only that member is woken.
func TestOrderManyHandOffs(t *testing.T) {
	const members, total = 8, 2400
	o := cache.NewOrder(members, time.Minute)
	keys := make([][]int64, members)
	for k := range int64(total) {
		// A fixed deal, uneven runs: member (k*k/7) mod 8.
		who := int((k * k / 7) % members)
		keys[who] = append(keys[who], k)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var mu sync.Mutex
	var got []int64
	var wg sync.WaitGroup
	for who := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ks := keys[who]
			for i, k := range ks {
				if i == len(ks)-1 {
					o.Defer(who, k, func() {
						mu.Lock()
						got = append(got, k)
						mu.Unlock()
					})
					return
				}
				if err := o.Wait(ctx, who, k); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				got = append(got, k)
				mu.Unlock()
				o.Done(who, ks[i+1])
			}
		}()
	}
	wg.Wait()
	// The deferred turns run on whichever goroutine brings them.
	for ctx.Err() == nil {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n == total {
			break
		}
		time.Sleep(time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != total {
		t.Fatalf("%d turns taken, want %d", len(got), total)
	}
	for i, k := range got {
		if k != int64(i) {
			t.Fatalf("turn %d was key %d: turns not taken in key order", i, k)
		}
	}
}
