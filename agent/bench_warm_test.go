package agent

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/sluicedata/sluice/agentapi"
)

// BenchmarkAgentWarmShuffled measures the agent's batch path on a warm
// cache over shuffled (py1e) epochs of 200,000 small samples (~25 bytes,
// like tokenized text) in shards of about 2,000: a shuffled epoch
// interleaves a block's shards, so the agent's reader changes shard at
// nearly every sample and takes and gives back the shard's cache lease
// each time. One worker, batches of 512, over the socket; through a cache
// without a limit and under one that holds the dataset. It reports wall
// and CPU time (this process: agent and client) a sample and the samples
// a reply carries, and checks each epoch's count and the sum of its
// sample IDs.
func BenchmarkAgentWarmShuffled(b *testing.B) {
	const n = 200_000
	for _, c := range []struct{ name, limit string }{{"cached", ""}, {"limited", "1gb"}} {
		b.Run(c.name, func(b *testing.B) {
			h := startAgentShards(b, n, 64<<10, nil)
			ctx := context.Background()
			cl, err := agentapi.Dial(ctx, h.sock, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer cl.Close()
			ds := h.dataset()
			ds.CacheLimit = c.limit
			w := agentapi.World{WorldSize: 1, LocalWorldSize: 1, NumWorkers: 1}
			op, err := cl.Open(ctx, agentapi.Open{Dataset: ds, Job: "bench", World: w})
			if err != nil {
				b.Fatal(err)
			}
			var replies int64
			epoch := func() {
				it, err := cl.Begin(ctx, agentapi.Begin{Handle: op.Handle, World: w})
				if err != nil {
					b.Fatal(err)
				}
				var rel []int64
				var count, sum int64
				for {
					r, err := cl.Next(ctx, agentapi.Next{Iter: it.Iter, Max: 512, Release: rel})
					replies++
					if err != nil {
						b.Fatal(err)
					}
					if r.Done {
						break
					}
					rel = []int64{r.ID}
					for _, e := range r.Entries {
						count++
						sum += e.Sample
					}
				}
				cl.End(ctx, it.Iter)
				if count != n || sum != n*(n-1)/2 {
					b.Fatalf("an epoch gave %d samples summing to %d, want %d summing to %d", count, sum, n, n*(n-1)/2)
				}
			}
			epoch() // warm: every shard local
			cpu0 := cpuTime(b)
			replies = 0
			var epochs int64
			for b.Loop() {
				epoch()
				epochs++
			}
			samples := float64(epochs * n)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/samples, "ns/sample")
			b.ReportMetric(float64((cpuTime(b)-cpu0).Nanoseconds())/samples, "cpu-ns/sample")
			b.ReportMetric(samples/float64(replies), "samples/reply")
		})
	}
}

// cpuTime returns the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
