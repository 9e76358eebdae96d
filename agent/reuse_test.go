package agent

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicedata/sluice/agentapi"
)

// TestReusedLocalRefused opens, beside a live dataset, another remote's
// dataset in the same local directory: refused, naming the directory, as
// MosaicML refuses a reused local directory. The two remotes' indexes are
// byte for byte alike (same sample count and shard sizes, no hashes), so
// before the check the second dataset opened and was served the first's
// cached shards. The same remote (spelled with a trailing slash), another
// split under the same local, and the directory once the first dataset
// is closed, are taken.
func TestReusedLocalRefused(t *testing.T) {
	h := startAgent(t, 10, nil)
	other := filepath.Join(filepath.Dir(h.remote), "other")
	writeDataset(t, other, 10, 1<<10)
	writeDataset(t, filepath.Join(other, "val"), 10, 1<<10)
	ctx := context.Background()
	w := agentapi.World{WorldSize: 1, LocalWorldSize: 1, NumWorkers: 1}
	first := h.dial()
	if _, err := first.Open(ctx, agentapi.Open{Dataset: h.dataset(), Job: "a", World: w}); err != nil {
		t.Fatal(err)
	}
	c := h.dial()
	reused := h.dataset()
	reused.Remote = other
	streams := agentapi.Dataset{BatchSize: 4, Streams: []agentapi.Stream{{Remote: other, Local: h.local}}}
	for name, ds := range map[string]agentapi.Dataset{"dataset": reused, "stream": streams} {
		_, err := c.Open(ctx, agentapi.Open{Dataset: ds, Job: "b", World: w})
		if !errors.Is(err, agentapi.ErrInvalid) || !strings.Contains(err.Error(), h.local) || !strings.Contains(err.Error(), "reused local directory") {
			t.Errorf("%s: another remote in %s beside a live dataset: %v, want ErrInvalid naming the directory", name, h.local, err)
		}
	}
	taken := h.dial()
	same := h.dataset()
	same.Remote += "/"
	split := reused
	split.Split = "val"
	for name, ds := range map[string]agentapi.Dataset{"same remote": same, "other split": split} {
		if _, err := taken.Open(ctx, agentapi.Open{Dataset: ds, Job: "c", World: w}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	// Closed, the first dataset's directory is free for another remote.
	first.Close()
	taken.Close()
	h.waitConns(1)
	if _, err := c.Open(ctx, agentapi.Open{Dataset: reused, Job: "b", World: w}); err != nil {
		t.Errorf("after the first dataset closed: %v", err)
	}
}
