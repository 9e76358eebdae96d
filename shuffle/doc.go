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
//   - (*Shuffle).Gather(dst, pos, n, want) writes only the positions of
//     [pos, pos+n) selected by a bitmap, compactly: for py1e it keeps and
//     sorts only the samples of the selected output ranks' buckets, so one
//     rank of a node costs memory in proportion to its part of the range.
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
//     node, but each shift is bounded by M, about half the random block
//     size. A short request (up to 16K positions, a resume's first batches)
//     guesses the position range of the requested ranks from the expected
//     count of smaller positions, counts the inputs certainly below it
//     without drawing, and draws only the shifts of inputs within M of it:
//     about one block of draws, O(request) memory (with a widened retry and
//     the window path below as fallbacks when the guess misses). Longer
//     requests evaluate a window of the range plus a margin of about 2M on
//     each side, bucket-sorting it in linear time, in bounded chunks, so
//     memory stays O(block_size), not O(N). Resuming therefore costs
//     O(block_size), independent of the epoch size, but no less: with one
//     canonical node and the default 4M block, the first sample of a 10M
//     epoch depends on about 4M random shifts.
//   - naive: numpy's permutation(N) is one global Fisher–Yates whose first
//     positions are decided by its last draws; it is inherently global. New
//     materialises it (int32 when N < 2^31, halving upstream's memory).
//
// What stays global for all algorithms is the O(N) replay of random draws in
// New (no data, O(units + blocks) memory; about 1.3 ns per sample, with two
// interleaved generator lanes) and, for naive, the permutation. py1br's
// overlapping blocks are replayed as a chain from the start of the node, so
// its resume cost grows towards the start of a node (O(block) at best).
//
// # Measured cost
//
// CPU time per operation (process user+system time, on a shared 2-core
// Xeon under load; wall time was up to 2–5× higher), shards of 10,000
// samples, NCN 8 and the default block size unless noted (go test -bench):
//
//	New (replay only)         10M: 13–15 ms (was 22)   100M: 136–141 ms (was 221), < 1.4 MB
//	Get, whole epoch, py1e    1M: 50 ms      10M: 510 ms      100M: 4.6 s (upstream-equivalent output)
//	Get, whole epoch, py1s    1M: 13 ms      10M: 116 ms      100M: 1.07 s
//	Get, whole epoch, py2s    1M: 28 ms      10M: 205 ms      100M: 2.3–3.4 s
//	Get, whole epoch, naive   1M: 14 ms      10M: 242 ms      100M: 4.1 s, 1.2 GB
//	resume at 90%, first 256 samples (New + Fill), before → after this tuning:
//	  py1e NCN 8              1M: 5.1 → 3.7 ms    10M: 33 → 21 ms, 0.8 MB
//	  py1e NCN 1 (block 4M)   1M: 18 → 14 ms      10M: 89 → 51 ms, 1.4 MB
//	  py1s                    1M: 2.3 → 1.5 ms    10M: 22 → 13.5 ms, 0.4 MB
//	  py1br NCN 8             1M: 4.0 → 3.7 ms    10M: 37 → 28 ms, 5.6 MB
//	  py1br NCN 1 (block 4M)  1M: 23 → 18 ms      10M: 87 → 75 ms, 23 MB
//	  naive                   1M: 8–14 ms    10M: 260–300 ms, 40 MB
//	one rank's whole epoch (8 nodes × 8 ranks, NCN 8; 1/64 of the samples,
//	shuffle + partition + mapping, see BenchmarkRankPlan):
//	  py1e                    10M: 81–88 ms  100M: 0.90 s, 320 MB
//	  py1s                    10M: 53 ms     100M: 0.39 s, 114 MB
//	  py1br                   10M: 52 ms     100M: 0.49 s, 148 MB
//
// (The rank figures are from before the tuning and map through Fill; plan
// maps py1e through Gather, see package plan.)
//
// # Concurrency
//
// A *Shuffle is immutable after New; its methods are safe for concurrent use.
package shuffle
