// Package sim plays a training run's input pipeline on a virtual clock,
// for `sluice simulate`: the real planner's per-node order (plan), the
// real eviction policy (cache's policy.go) and the real prefetch order
// (stream/prefetch: one Walk per consumer, a DataLoader worker's iterator
// or with RankIterator a rank's, each over its own order with its own
// window, budget and fetch slots, a node's walks sharing its cache, link
// and eviction), over a model of the store (per-request latency, a FIFO
// link per node), the consumers (each rank reads its part of a step in
// order; a DataLoader worker up to its prefetch factor of batches ahead of
// the training loop, as torch's DataLoader asks) and the training step.
// It reports time to first batch, the
// stalled steps and their wait, throughput, bytes and requests to the
// store, peak cache use and evictions, per node and for the run, and
// searches the smallest cache limit that adds no stall. With
// Config.OrderAdmissions it plays stream's ordered admissions: a rank's
// workers take their shard changes in turn, in the training loop's
// order, and the eviction sees the real cache's candidates exactly
// (turns.go, window.go). What it models,
// what it does not and its measured error against the real stream over
// S3 are in docs/input-bound.md.
//
// The nodes step together (a step starts when every node's batch is
// ready), on up to GOMAXPROCS goroutines (parallel.go), so every node's
// state is live at once: a node numbers the shards it meets (node.local)
// and keeps compact runs, so that its tables hold its own shards close
// together; the groups of nodes meet at each step at a barrier that
// spins briefly before it sleeps. The seed's scale (39,000 shards, 20
// nodes × 8 ranks × 8 workers, one epoch, a 10 GB cache) takes 5.5–6.2 s
// (10–11 CPU s) with turns and 4.2–5.0 s (8 CPU s) without, in under
// 0.55 GB, on two cores at a load of ~2 (BenchmarkSeedScaleTight,
// BenchmarkSeedScaleTightTurns; docs/input-bound.md, Scale).
package sim
