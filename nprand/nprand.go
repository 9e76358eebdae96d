// Package nprand reproduces, bit for bit, the parts of numpy's random
// Generator that MosaicML Streaming uses to order samples:
// numpy.random.default_rng(seed), i.e. Generator(PCG64(SeedSequence(seed))).
//
// The emulation follows Appendix A of the MDS specification
// (../shared/spec/MDS-FORMAT.md) and is checked against vectors produced by
// numpy 1.24.2 (testdata/numpy_rng.json and spec A.6).
//
// # API
//
//   - New(seed) returns a *Generator equal to default_rng(seed).
//   - Raw draws: Uint64 (next64), Uint32 (next32, buffered half of a 64-bit
//     draw, exactly like numpy), Float64 (53-bit double in [0, 1)), and
//     FillFloat64 (a run of Float64 draws on four interleaved LCG lanes).
//   - Primitives: Interval (masked rejection, numpy random_interval, used by
//     shuffle) and Bounded (Lemire, numpy random_bounded_uint64, used by
//     integers and choice).
//   - Methods with numpy's names: Shuffle / ShuffleInt64 / ShuffleInt32
//     (rng.shuffle; ShuffleInt64Tail makes only the steps that settle a
//     suffix), Permutation (rng.permutation), Integer and Integers
//     (rng.integers, high exclusive), Uniform and Uniforms (rng.uniform),
//     Choice (rng.choice(n, k, replace=False)).
//   - Advance(n) jumps the PCG64 state n steps ahead in O(log n), as numpy's
//     PCG64.advance does. SkipShuffle(n) (and SkipInterval) consume exactly the
//     draws a shuffle of n elements would, without any data: this is how
//     package shuffle finds the generator state at any shard of an epoch
//     without materialising the epoch (about 2 ns per element).
//     SkipShuffles makes the skips of a run of shuffles, reporting the
//     generator before each (the vector lanes below go on from one to the
//     next), and JumpOf / AdvanceJump precompute an Advance made many times.
//   - CountLine counts a run of Float64-style draws below a threshold that
//     moves linearly, on integers and without storing the draws (package
//     shuffle's py1e resume counts positions with it).
//   - ShuffleSources names the original positions of the elements a
//     shuffle leaves at a few positions, making the draws of the steps down
//     to the lowest of them and moving no data: each is followed back
//     through the later steps' partners (package shuffle's py1e resume
//     finds its first batch's sample IDs with it).
//
// On amd64 CPUs with AVX-512 IFMA, CD and VPOPCNTDQ (golang.org/x/sys/cpu;
// every IFMA CPU but Cannon Lake has the other two), SkipShuffle and
// CountLine run their bulk on 16 vector lanes of the LCG (vec_amd64.s),
// with exactly the scalar code's results (vec_amd64_test.go compares
// them); GODEBUG=cpu.avx512ifma=off selects the scalar code. A skip
// there counts 16 tries at a time without the sequential accept chain,
// about 0.5 ns per element in a long shuffle's upper bands against 2–3
// ns for the scalar loop (shared 2-core Xeon, loaded); its last, small
// bands go try by try (sixteen tries written out, no loop).
//
// Shuffles and skips keep the generator state in registers and try both
// 32-bit halves of each 64-bit draw without branches; on a 1M-element slice a
// shuffle costs about 8 ms and a skip 2 ms (shared 2-core Xeon). A skip
// is bound by making its draws (three 64-bit multiplies each, about 5
// cycles a draw with the walk) and is inherently sequential: a walk
// started from a guessed point does not meet the exact one (a walk in a
// lower band accepts more often, so two walks drift apart at every band
// edge), so a run of skips cannot be split across goroutines cheaply and
// exactly (a trial over runs of 10,000-element shuffles: a walk from the
// expected starting point met the exact one after 16–17 shuffles for 2 of
// 5 seeds and not within 100 for the other 3).
//
// # Concurrency
//
// A Generator is a small value with mutable state; it is not safe for
// concurrent use. Copying a Generator value (g2 := *g) forks an independent
// generator with identical future output, which is how callers checkpoint a
// position in the stream.
package nprand

import (
	"errors"
)

// ErrInvalidArgument is matched (errors.Is) by every error this package
// returns for arguments numpy itself would reject (empty ranges, sample sizes
// larger than the population, non-finite ranges).
var ErrInvalidArgument = errors.New("nprand: invalid argument")
