package agent

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/sluicedata/sluice/agentapi"
)

// TestWorkersShareTheRankEpoch: the workers of a rank play one epoch
// counter, as MosaicML's share next_epoch. A dataset iterated once in the
// training process (a peek, num_workers=0) and then by 2 workers gave
// worker 0 epoch 1 and worker 1 epoch 0 (each cursor counted its own), so
// the 2-worker epoch delivered a quarter of its samples twice and missed
// another quarter; the same after an iteration with fewer workers, or one
// a loop broke out of before a worker began. Every round here must give
// its workers one epoch, one past the round before, and cover the
// dataset exactly once.
func TestWorkersShareTheRankEpoch(t *testing.T) {
	h := startAgent(t, 120, nil)
	ctx := context.Background()
	c := h.dial()
	world := func(worker, workers int) agentapi.World {
		return agentapi.World{WorldSize: 1, LocalWorldSize: 1, Worker: worker, NumWorkers: workers}
	}
	op, err := c.Open(ctx, agentapi.Open{Dataset: h.dataset(), Job: "j", World: world(0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	// round plays one iteration of `workers` workers, those of begin
	// (all when nil), concurrently; it returns their epochs and, when
	// drained, the samples they delivered.
	round := func(token string, workers int, begin []int, drained bool) (map[int64]bool, map[int64]int) {
		if begin == nil {
			for w := range workers {
				begin = append(begin, w)
			}
		}
		var mu sync.Mutex
		epochs, seen := map[int64]bool{}, map[int64]int{}
		var wg sync.WaitGroup
		for _, w := range begin {
			wc := h.dial()
			wop, err := wc.Open(ctx, agentapi.Open{Dataset: h.dataset(), Job: "j", World: world(w, workers)})
			if err != nil {
				t.Fatal(err)
			}
			// Begun in the order given, each worker's samples then
			// drained concurrently.
			b, err := wc.Begin(ctx, agentapi.Begin{Handle: wop.Handle, World: world(w, workers), Round: token})
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer wc.Close()
				var ids []int64
				if drained {
					ids = drain(t, wc, b.Iter, 0)
				}
				mu.Lock()
				defer mu.Unlock()
				epochs[b.Epoch] = true
				for _, id := range ids {
					seen[id]++
				}
			}()
		}
		wg.Wait()
		return epochs, seen
	}
	// The peek: one sample's worth of an iteration in the training process.
	b, err := c.Begin(ctx, agentapi.Begin{Handle: op.Handle, World: world(0, 1), Round: "peek"})
	if err != nil || b.Epoch != 0 {
		t.Fatalf("peek: epoch %d, %v", b.Epoch, err)
	}
	want := int64(1)
	for i, r := range []struct {
		workers int
		begin   []int
		drained bool
	}{
		{workers: 2, drained: true},
		{workers: 2, drained: true},
		{workers: 4, drained: true},
		{workers: 3, begin: []int{0}}, // a loop that broke before workers 1 and 2 began
		// The next loop's workers 2 and 1 begin first: only the round's
		// name tells them from round 3's late workers.
		{workers: 3, begin: []int{2, 1, 0}, drained: true},
		{workers: 1, drained: true},
	} {
		epochs, seen := round(fmt.Sprintf("iter-%d", i), r.workers, r.begin, r.drained)
		if len(epochs) != 1 || !epochs[want] {
			t.Fatalf("round %d (%d workers): epochs %v, want all %d", i, r.workers, epochs, want)
		}
		if r.drained {
			for id := range int64(120) {
				if seen[id] != 1 {
					t.Fatalf("round %d (epoch %d, %d workers): sample %d delivered %d times", i, want, r.workers, id, seen[id])
				}
			}
		}
		want++
	}
}
