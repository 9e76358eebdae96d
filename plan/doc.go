// Package plan computes the epoch plan of a streaming dataset exactly as
// MosaicML Streaming does: which sample every node, rank and DataLoader
// worker sees at every step, for several streams with weights, the four
// batching methods, elastic resumption, and the state dict that records the
// position. It is pure: no I/O, no goroutines, no global state. The
// numpy-compatible generator, the shuffles and the partitions live in the
// packages nprand, shuffle and partition; plan composes them the way
// MosaicML's StreamingDataset does (spec §11–§13 of
// ../shared/spec/MDS-FORMAT.md).
//
// # API
//
//		p, err := plan.New(streams, &plan.Options{Shuffle: true, BatchSize: 32})
//		tr := p.NewTracker()                   // epoch counter + resume logic
//		tr.Load(state)                         // optional: resume (MosaicML load_state_dict)
//		spec, err := tr.Begin(shape)           // next iteration (MosaicML __iter__)
//		ep, err := p.Epoch(spec)               // the epoch, computed on demand
//		ids, err := ep.Worker(node, rank, w)   // one worker's sample IDs, -1 = padding
//		it, err := ep.WorkerIter(node, rank, w) // the same, lazily: it.Next() per segment
//		sched, err := ep.NodeSchedule(node)    // the node's future shard use (cache)
//		st, err := tr.State(world, yielded)    // state dict after `yielded` samples on this rank
//
//	  - Stream, Options: MosaicML's Stream and StreamingDataset arguments,
//	    names and defaults (§15). Planner.Streams reports the resolved
//	    weights (choose, proportion, repeat); Locate maps a global sample ID
//	    to (shard, index in shard).
//	  - World, WorldFromEnv, World.Parallel, World.Shape: the process's place
//	    from RANK/WORLD_SIZE/LOCAL_WORLD_SIZE or explicit values, and the
//	    replicated "parallel" world in which order is computed (§13.1).
//	  - DetectWorld, Placement: the world from whichever launcher started
//	    the process (torchrun, Open MPI, Slurm, Kubernetes), checked for
//	    conflicts between nested launchers.
//	  - EpochSpec, Epoch: one epoch for one parallel shape from one resume
//	    position. Worker returns generate_work()[node][rank][worker]
//	    flattened; WorkerIter yields the same lazily (the first batch alone,
//	    then the rest: the time to the first sample of a resume); Work
//	    returns the whole generate_work array; RankBatches
//	    the batches an in-order DataLoader yields on a rank; NodeOrder the
//	    node's samples in consumption order; NodeSchedule its shard runs with
//	    NextUse for Belady eviction.
//	  - State: the state dict, JSON-identical to MosaicML's (sorted keys,
//	    Python separators), parsed from either side, with or without
//	    initial_physical_nodes. Tracker reproduces next_epoch, the stale-state
//	    rule, the overrides of num_canonical_nodes/shuffle_seed/
//	    initial_physical_nodes, and sample_in_epoch accounting.
//
// # Resumption
//
// For batching_method random, a resumed epoch re-deals the canonical order
// after dropping sample_in_epoch samples (partition drop_first), so a run
// can resume on any shape with the same canonical nodes (with the relaxed
// partition and the same global batch size, even on a node count that
// neither divides nor is a multiple of them); the other batching methods
// skip sample_in_epoch / global_batch whole global batches.
//
// # Cost
//
// For random batching nothing epoch-sized is materialised: the partition
// yields a rank's canonical positions directly (O(rank's share)), the
// resampling is kept as shard-sized units (no small_per_big array), and the
// shuffle fills only the position ranges the rank touches, in bounded
// chunks. What remains global is inside package shuffle: preparing an
// epoch's shuffle replays the epoch's random draws once (numpy's generator
// is sequential and its rejection sampling makes draw counts
// data-dependent), and naive is a single global permutation. py1e evaluates
// a window of about a shuffle block around the requested positions, so
// resuming costs O(block size) plus that replay; py1s, py2s, py1br and py1b
// touch only the shards or blocks that hold requested positions. A node's
// share is the unit of the shuffle's work: every rank of a node draws from
// the same canonical rows, so NodeOrder and NodeSchedule compute all of a
// node's ranks in one pass.
//
// py1e positions are mapped through shuffle.Gather, which keeps and sorts
// only the window buckets holding the rank's positions. WorkerIter maps a
// worker's first batch alone, so a resumed consumer starts after the
// shuffle's preparation plus what one batch touches: a span (py1s, py2s), a
// chain of blocks (py1br, py1b), about one block of py1e shifts, or the
// whole permutation (naive).
//
// Measured (CPU time per op on a shared 2-core Xeon under load, wall time
// up to 2–5× higher; shards of 4096, batch 32; before → after this tuning):
//
//	resume at 90%, one worker's whole remainder (Worker; 1 node × 8 × 8,
//	MosaicML defaults: NCN 1, block 4M for py1e/py1br):
//	  py1e   1M: 28 → 19 ms, 11 → 2.4 MB   10M: 160–168 → 112–128 ms, 56 → 20 MB
//	  py1s   1M: 3.1–3.9 → 2.6 ms          10M: 25–27 → 18–19 ms, 3.3 MB
//	  py1br  1M: 15–21 → 19–22 ms, 9 MB    10M: 61–66 → 51–56 ms, 23 MB
//	  naive  1M: 9–13 ms, 4.7 MB           10M: 210–300 ms, 42 MB (unchanged)
//	resume, first batch only (WorkerIter; at 10%, 50%, 90% of 10M):
//	  none   0.2–1.2 ms   py1s 14–17 ms   py1e 42–49 ms, 2–3 MB
//	  py1br  46–52 ms at 90%, 112–185 ms at 10% (block chain)   naive 220–280 ms
//	  (1M, at 90%: py1s 2.2–2.6 ms, py1e 11 ms, py1br 16 ms, naive 10 ms)
//	  (py1e at 90% of 10M is now 9.5–12 ms, the node's 64 workers together
//	  about 21 ms: the kernels of package nprand, see docs/feed.md)
//	one rank's whole epoch (8 × 8 × 8, NCN 8, BenchmarkRank):
//	  py1e   10M: 84 → 82 ms, 33 → 25 MB   100M: 0.91 → 0.83 s, 252 → 245 MB allocated
//	  py1s   10M: 37 → 27 ms                100M: 0.36 → 0.27 s, 52 MB
//	  py1br  10M: 49 → 42 ms                100M: 0.49 → 0.41 s, 99 MB
//
// The stratified, per_stream and device_per_stream methods are inherently
// global (they count the full batches of every stream) and build the whole
// arrangement once per Epoch.
//
// # Concurrency
//
// Planner, Epoch and Schedule are safe for concurrent use; Tracker is not.
package plan
