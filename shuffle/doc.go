// Package shuffle computes MosaicML Streaming's per-epoch sample shuffles
// (streaming/base/shuffle) bit for bit: the algorithms naive, py1s, py2s,
// py1br, py1e (the default) and the removed py1b (kept for reading old
// configurations). It is pure: no I/O, no storage or format imports.
//
// The specification is §10 of ../shared/spec/MDS-FORMAT.md; randomness comes
// from package nprand (numpy's default_rng emulation). Results are checked
// against permutations written by the real library (testdata/shuffles.json)
// and the worked example of spec §10.7.
//
// # API
//
//   - Params names the inputs of upstream's get_shuffle(algo, shard_sizes,
//     num_canonical_nodes, seed, epoch, block_size). UnitSizes are the
//     shuffle units (shards, or stream-resampling repeats of shards).
//   - Get(p) returns the whole permutation: element i is the sample ID found
//     at position i of the canonical order, exactly like get_shuffle.
//   - New(p) prepares a *Shuffle without materialising the permutation;
//     (*Shuffle).Fill(dst, pos) writes the sample IDs of positions
//     [pos, pos+len(dst)) and (*Shuffle).At(pos) returns one. NodeRange(c)
//     gives canonical node c's positions, the unit the partition interleaves.
//   - DefaultBlockSize and DefaultNumCanonicalNodes resolve upstream's lazy
//     defaults (spec §13.3); ParseAlgo validates a configured name.
//
// # Cost and which algorithms resume cheaply
//
// Every algorithm except naive draws its randomness from two numpy streams
// that are consumed strictly in order: the run generator (seed) and the epoch
// generator (seed+epoch). Fisher–Yates draws use rejection sampling, so the
// generator state at a given span or block can only be found by replaying the
// draws before it. New therefore replays every draw of the epoch once without
// touching any sample data (about 1–3 ns per sample, no memory) and records a
// generator checkpoint at each span and block. After that:
//
//   - py1s, py2s, py1b, py1br: Fill touches only the spans (py1s, py2s) or
//     blocks (py1b, py1br; overlapping py1br blocks are replayed as a chain)
//     that contain the requested positions. Time and memory are
//     O(len(dst) + size of the touched shards or blocks): a consumer can start
//     at any position without building the rest of the epoch.
//   - py1e: a sample's output position depends on an argsort of its canonical
//     node, but each shift is bounded by half the random block size, so Fill
//     evaluates a window of the requested range plus a margin of about
//     2·1.25·block_size/2 positions on each side (plus the touched shards),
//     bucket-sorting it in linear time. Resuming therefore costs
//     O(block_size), independent of the epoch size; large requests are
//     processed in bounded chunks, so memory stays O(block_size), not O(N).
//   - naive: numpy's permutation(N) is one global Fisher–Yates whose first
//     positions are decided by its last draws; it is inherently global. New
//     materialises it (int32 when N < 2^31, halving upstream's memory).
//
// What stays global for all algorithms is the O(N) replay of random draws in
// New (no data, O(units + blocks) memory) and, for naive, the permutation.
//
// # Concurrency
//
// A *Shuffle is immutable after New; its methods are safe for concurrent use.
package shuffle
