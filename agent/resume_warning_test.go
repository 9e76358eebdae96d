package agent

import (
	"context"
	"strings"
	"testing"

	"github.com/sluicedata/sluice/agentapi"
)

// TestResumeWarning: a state saved after 40 of 120 samples, resumed on 3
// ranks, leaves 80 samples that MosaicML's partition pads to 81 by
// repeating one; the leader worker's Begun says so, the other ranks' do
// not, and a resume on one rank (exact) warns nobody.
func TestResumeWarning(t *testing.T) {
	h := startAgent(t, 120, nil)
	c := h.dial()
	ctx := context.Background()
	st := agentapi.State{Epoch: 0, SampleInEpoch: 40, NumCanonicalNodes: 2, ShuffleSeed: 9176}
	begin := func(job string, w agentapi.World) agentapi.Begun {
		t.Helper()
		op, err := c.Open(ctx, agentapi.Open{Dataset: h.dataset(), Job: job, World: w})
		if err != nil {
			t.Fatal(err)
		}
		s := st
		b, err := c.Begin(ctx, agentapi.Begin{Handle: op.Handle, World: w, Resume: &s})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.End(ctx, b.Iter); err != nil {
			t.Fatal(err)
		}
		return b
	}
	for rank := range 3 {
		b := begin("three", agentapi.World{Rank: rank, WorldSize: 3, LocalWorldSize: 3, NumWorkers: 2})
		if rank > 0 {
			if len(b.Warnings) != 0 {
				t.Errorf("rank %d warned: %q", rank, b.Warnings)
			}
			continue
		}
		if len(b.Warnings) != 1 || !strings.Contains(b.Warnings[0], "not exactly-once") ||
			!strings.Contains(b.Warnings[0], "80 remaining samples per node do not divide over 3 ranks") {
			t.Errorf("rank 0 warnings %q, want the rank padding named", b.Warnings)
		}
	}
	if b := begin("one", agentapi.World{WorldSize: 1, LocalWorldSize: 1, NumWorkers: 1}); len(b.Warnings) != 0 {
		t.Errorf("exact resume warned: %q", b.Warnings)
	}
}
