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
//	  - EpochSpec, Epoch: one epoch for one parallel shape from one resume
//	    position. Worker returns generate_work()[node][rank][worker]
//	    flattened; Work returns the whole generate_work array; RankBatches
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
// The stratified, per_stream and device_per_stream methods are inherently
// global (they count the full batches of every stream) and build the whole
// arrangement once per Epoch.
//
// # Concurrency
//
// Planner, Epoch and Schedule are safe for concurrent use; Tracker is not.
package plan
