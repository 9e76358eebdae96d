package agent

import (
	"context"
	"testing"

	"github.com/sluicedata/sluice/agentapi"
)

// TestCursorsShareTheDataset checks that the cursors of a job's workers
// are cursors of the job's one opened dataset (its parsed index and
// planner), not datasets opened again per worker, and that they outlive
// the handle that opened the dataset while the job has another: the
// first connection goes, the second's workers keep iterating.
func TestCursorsShareTheDataset(t *testing.T) {
	h := startAgent(t, 120, nil)
	ctx := context.Background()
	c1, c2 := h.dial(), h.dial()
	w := agentapi.World{WorldSize: 1, LocalWorldSize: 1, NumWorkers: 3}
	op1, err := c1.Open(ctx, agentapi.Open{Dataset: h.dataset(), Job: "j", World: w})
	if err != nil {
		t.Fatal(err)
	}
	op2, err := c2.Open(ctx, agentapi.Open{Dataset: h.dataset(), Job: "j", World: w})
	if err != nil {
		t.Fatal(err)
	}
	for wk := range 3 {
		ww := w
		ww.Worker = wk
		if _, err := c1.Begin(ctx, agentapi.Begin{Handle: op1.Handle, World: ww}); err != nil {
			t.Fatal(err)
		}
	}
	h.a.mu.Lock()
	var j *job
	for _, jj := range h.a.jobs {
		j = jj
	}
	if j == nil || len(j.cursors) != 3 {
		h.a.mu.Unlock()
		t.Fatalf("job %v: want 3 cursors", j)
	}
	for k, c := range j.cursors {
		if c.Planner() != j.ds.ds.Planner() || c.NumShards() != j.ds.ds.NumShards() {
			h.a.mu.Unlock()
			t.Fatalf("cursor %v has a planner of its own: the dataset was opened again", k)
		}
	}
	h.a.mu.Unlock()
	// The first connection goes; the job (and the dataset its cursors
	// share) lives on with the second.
	c1.Close()
	h.waitConns(1)
	var total int
	for wk := range 3 {
		ww := w
		ww.Worker = wk
		b, err := c2.Begin(ctx, agentapi.Begin{Handle: op2.Handle, World: ww})
		if err != nil {
			t.Fatal(err)
		}
		total += len(drain(t, c2, b.Iter, 0))
	}
	if total == 0 {
		t.Fatal("no samples after the first connection closed")
	}
}
