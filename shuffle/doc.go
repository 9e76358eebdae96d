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
//     evaluates a window of the requested range plus a margin of up to about
//     1.25·block_size positions on each side (plus the touched shards),
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
// # Measured cost
//
// CPU time per operation (process user+system time, on a shared 2-core
// Xeon under heavy load; wall time was 2–5× higher), shards of 10,000
// samples, NCN 8 and the default block size unless noted (go test -bench):
//
//	New (replay only)         1M: 2–4 ms     10M: 20–40 ms    100M: 200–410 ms, < 1.4 MB
//	Get, whole epoch, py1e    1M: 50 ms      10M: 510 ms      100M: 4.6 s (upstream-equivalent output)
//	Get, whole epoch, py1s    1M: 13 ms      10M: 116 ms      100M: 1.07 s
//	Get, whole epoch, py2s    1M: 28 ms      10M: 205 ms      100M: 2.3–3.4 s
//	Get, whole epoch, naive   1M: 14 ms      10M: 242 ms      100M: 4.1 s, 1.2 GB
//	resume at 90%, first 256 samples (New + Fill):
//	  py1e NCN 8              1M: 4.4 ms     10M: 34 ms, 0.6 MB
//	  py1e NCN 1 (block 4M)   1M: 20 ms      10M: 101 ms, 1.1 MB
//	  py1s                    1M: 2.6 ms     10M: 20 ms, 0.4 MB
//	  py1br NCN 8             1M: 3.8 ms     10M: 35 ms, 5.6 MB
//	  naive                   1M: 8–14 ms    10M: 260–300 ms, 40 MB
//	one rank's whole epoch (8 nodes × 8 ranks, NCN 8; 1/64 of the samples,
//	shuffle + partition + mapping, see BenchmarkRankPlan):
//	  py1e                    10M: 81–88 ms  100M: 0.90 s, 320 MB
//	  py1s                    10M: 53 ms     100M: 0.39 s, 114 MB
//	  py1br                   10M: 52 ms     100M: 0.49 s, 148 MB
//
// # Concurrency
//
// A *Shuffle is immutable after New; its methods are safe for concurrent use.
package shuffle
