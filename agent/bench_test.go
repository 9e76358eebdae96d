package agent

import (
	"context"
	"testing"

	"github.com/sluicedata/sluice/agentapi"
)

// BenchmarkNext measures the agent's batch path on a warm cache: one epoch
// of 20000 small samples (~25 bytes, 1 MiB shards) per iteration, in
// batches of 512, over the socket.
func BenchmarkNext(b *testing.B) {
	h := startAgentShards(b, 20000, 1<<20, nil)
	ctx := context.Background()
	c, err := agentapi.Dial(ctx, h.sock, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	w := agentapi.World{WorldSize: 1, LocalWorldSize: 1, NumWorkers: 1}
	op, err := c.Open(ctx, agentapi.Open{Dataset: h.dataset(), Job: "bench", World: w})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	n, calls := 0, 0
	for b.Loop() {
		it, err := c.Begin(ctx, agentapi.Begin{Handle: op.Handle, World: w})
		if err != nil {
			b.Fatal(err)
		}
		var rel []int64
		for {
			r, err := c.Next(ctx, agentapi.Next{Iter: it.Iter, Max: 512, Release: rel})
			calls++
			if err != nil {
				b.Fatal(err)
			}
			if r.Done {
				break
			}
			rel = []int64{r.ID}
			n += len(r.Entries)
		}
		c.End(ctx, it.Iter)
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "samples/s")
	b.ReportMetric(float64(n)/float64(calls), "samples/reply")
}
