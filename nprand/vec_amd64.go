package nprand

import (
	"math/bits"

	"golang.org/x/sys/cpu"
)

// hasVec reports whether the CPU runs the AVX-512 kernels (skipVec,
// countVec, shuffleVec): AVX-512F with IFMA (52-bit multiply-add, the
// 128-bit LCG step on 8 lanes per register), CD and VPOPCNTDQ (skipVec's
// prefix counts in the narrow bands: VPBROADCASTMW2D, VPOPCNTD; every
// IFMA CPU but Cannon Lake has them), and BMI1/BMI2/POPCNT for their
// scalar parts. It is read once; elsewhere the scalar code runs.
var hasVec = cpu.X86.HasAVX512F && cpu.X86.HasAVX512IFMA &&
	cpu.X86.HasAVX512CD && cpu.X86.HasAVX512VPOPCNTDQ &&
	cpu.X86.HasBMI1 && cpu.X86.HasBMI2 && cpu.X86.HasPOPCNT

// Lengths below which the vector kernels do not pay: setting up their 16
// lanes costs about 16 scalar steps, and a skip's last bands run try by
// try anyway (a skip of 256 measured slower than the scalar loop, one of
// 512 faster).
const (
	skipVecMin = 384
	lineVecMin = 256
)

// vecState is 16 LCG lanes in the kernels' layout: lane k holds the
// state whose output is the k-th next draw, as three limbs of 52, 52 and
// 24 bits (s[0][k] bits 0–51, s[1][k] bits 52–103, s[2][k] bits 104–127;
// s[2] may carry junk above bit 24, which never reaches the low 128 bits).
// m and c are the limbs of the map x -> M¹⁶x + c¹⁶ that advances a lane
// by 16 steps. The layout is fixed: the assembly reads it by offset.
type vecState struct {
	s [3][16]uint64
	m [3]uint64
	c [3]uint64
}

const limb52 = 1<<52 - 1

func toLimbs(x u128) (a0, a1, a2 uint64) {
	return x.lo & limb52, (x.lo>>52 | x.hi<<12) & limb52, (x.hi >> 40) & (1<<24 - 1)
}

func fromLimbs(a0, a1, a2 uint64) u128 {
	return u128{hi: a1>>12 | a2<<40, lo: a0&limb52 | a1<<52}
}

// init sets the lanes to the states of g's next 16 draws and the
// 16-step map of g's stream.
func (st *vecState) init(g *Generator) {
	// Two chains (even and odd lanes) of 2-step maps x -> M²x + (M+1)·inc.
	m2 := mul128(pcgMult, pcgMult)
	c2 := mul128(add128(pcgMult, u128{0, 1}), g.inc)
	a := add128(mul128(g.state, pcgMult), g.inc)
	b := add128(mul128(a, pcgMult), g.inc)
	for k := 0; k < 16; k += 2 {
		st.s[0][k], st.s[1][k], st.s[2][k] = toLimbs(a)
		st.s[0][k+1], st.s[1][k+1], st.s[2][k+1] = toLimbs(b)
		a = add128(mul128(a, m2), c2)
		b = add128(mul128(b, m2), c2)
	}
	// x -> M¹⁶x + (1 + M + … + M¹⁵)·inc.
	st.m[0], st.m[1], st.m[2] = toLimbs(pcgMult16)
	st.c[0], st.c[1], st.c[2] = toLimbs(mul128(pcgSum16, g.inc))
}

// pcgMult16 is pcgMult¹⁶ and pcgSum16 is 1 + pcgMult + … + pcgMult¹⁵,
// mod 2^128 (TestPCGConstants checks them).
var (
	pcgMult16 = u128{0xb6a4239f3b315f84, 0xf6ef6d3d288c03c1}
	pcgSum16  = u128{0x6ed699db168fb143, 0xa9072151352439f0}
)

// lane returns lane k's state.
func (st *vecState) lane(k int) u128 {
	return fromLimbs(st.s[0][k], st.s[1][k], st.s[2][k])
}

// pcgInv is the inverse of pcgMult mod 2^128 (TestPCGInverse checks it).
var pcgInv = u128{0x07dda22b93979860, 0x98abc8b0716eac8d}

// before returns the state one step before s in g's stream.
func (g *Generator) before(s u128) u128 {
	lo, b := bits.Sub64(s.lo, g.inc.lo, 0)
	hi, _ := bits.Sub64(s.hi, g.inc.hi, b)
	return mul128(u128{hi, lo}, pcgInv)
}

// output is PCG64's output function (XSL-RR) of a state.
func output(s u128) uint64 {
	return bits.RotateLeft64(s.hi^s.lo, -int(s.hi>>58))
}

// skipVec makes a shuffle's steps i, i-1, … (mask = 2^bitlen(i) - 1)
// with the draws of st's lanes, 32 tries (16 draws) at a time, for at
// most blocks blocks. When i reaches 0 it returns iOut 0 and the try of
// the last block at which it did (even: the lower half of its draw,
// leaving the upper half unused), leaving st's lanes at that block;
// otherwise the i and mask to go on with, st's lanes at the next block.
// A block whose tries all lie in one band (of at least 64 values) is
// counted in two halves of 16 tries without a sequential chain: try t of
// a half is certainly accepted when its value is <= i - t and certainly
// rejected when it is > i, and the rare tries between are resolved in
// order. Blocks that cross a band, or lie in the last, small bands, run
// try by try. (Halves of 16 measured about 20% faster than whole blocks
// of 32 on a 4096-sample span: half as many undecided tries.) The first
// block's tries before from (0 to 32) are not made: a skip that goes on
// from where the lanes' last one ended starts there.
//
//go:noescape
func skipVec(st *vecState, i, mask uint64, blocks, from int) (t, iOut, maskOut uint64)

// vecBlocks bounds the blocks of one kernel call (about 0.2 ms): an
// assembly loop cannot be preempted, so a long skip returns to Go between
// calls. skipVec has a stack check (it is not NOSPLIT), and its calls
// are where the scheduler stops SkipShuffles' loop, whose other calls
// (the size and at callbacks) are usually leaf functions without one: a
// signal almost always lands in the assembly, and the runtime waited up
// to the whole skip (5-6 ms median) to stop the world for a GC
// (TestSkipsPreemptible).
const vecBlocks = 1 << 14

// skipFast runs skipLoop(i) on the vector kernel when the CPU has it and
// the run is long enough, reporting whether it did.
func (g *Generator) skipFast(i uint64) bool {
	if !hasVec || i < skipVecMin {
		return false
	}
	g.skipVector(i, vecBlocks)
	return true
}

// skipVector is skipLoop(i) on the vector kernel (hasVec must hold), at
// most blocks blocks per kernel call.
func (g *Generator) skipVector(i uint64, blocks int) {
	var st vecState
	st.init(g)
	mask := uint64(1)<<bits.Len64(i) - 1
	for {
		t, ni, nm := skipVec(&st, i, mask, blocks, 0)
		if ni == 0 {
			s := st.lane(int(t / 2))
			g.state = s
			if t%2 == 0 {
				g.buf, g.has32 = uint32(output(s)>>32), true
			}
			return
		}
		i, mask = ni, nm
	}
}

// skipsFast is SkipShuffles on the vector kernel when the CPU has it,
// reporting whether it ran. The lanes stay live from one shuffle to the
// next: a shuffle that ended at try t of a block goes on at try t+1 of
// the same lanes (skipVec's from), so the generator is only rebuilt from
// one lane (to report it) instead of 16 lanes from the generator. Runs
// that the lanes do not serve (more than 2^32 elements, or short ones
// while no lanes are live) take SkipShuffle's own path.
func (g *Generator) skipsFast(count int, size func(int) int, at func(int, Generator)) bool {
	if !hasVec {
		return false
	}
	g.skipsVector(count, size, at, vecBlocks)
	return true
}

// skipsVector is skipsFast's work (hasVec must hold), at most blocks
// blocks per kernel call.
func (g *Generator) skipsVector(count int, size func(int) int, at func(int, Generator), blocks int) {
	var st vecState
	live, from := false, 0
	for k := range count {
		at(k, *g)
		n := size(k)
		if n <= 1 {
			continue // no draws
		}
		if uint64(n-1) > 0xffffffff {
			g.SkipShuffle(n)
			live = false
			continue
		}
		i := uint64(n - 1)
		if !live {
			if i = g.skipStart(n); i == 0 {
				continue
			}
			if i < skipVecMin {
				g.skipLoop(i)
				continue
			}
			st.init(g)
			live, from = true, 0
		}
		mask := uint64(1)<<bits.Len64(i) - 1
		for {
			t, ni, nm := skipVec(&st, i, mask, blocks, from)
			if ni == 0 {
				s := st.lane(int(t / 2))
				g.state, g.has32 = s, t%2 == 0
				if g.has32 {
					g.buf = uint32(output(s) >> 32)
				}
				from = int(t) + 1
				break
			}
			i, mask, from = ni, nm, 0
		}
	}
}

// countVec counts blocks of 16 draws of st's lanes against a line for
// CountLine: lane t's draw r (>> 11) against ks[t] (the line minus lo),
// d = r - ks[t]; it adds to below the d < lo and stores the d with
// uint64(d) < w in order as hits (their draw index tBase + 16·block + t
// and r into hitT and hitV, at most maxHits, checked before each block
// with a hit). After each block the lanes advance 16 steps and ks falls
// by step16. It returns below, the blocks done and the hits stored; it
// stops early only when the hits might not fit.
//
//go:noescape
func countVec(st *vecState, ks *[16]int64, blocks int, lo int64, w uint64, step16 int64, tBase int64, hitT *int64, hitV *uint64, maxHits int) (below, done, nHits int)

// countLineFast is CountLine on the vector kernel when the CPU has it and
// the run is long enough (ok false: the caller runs the scalar code).
func (g *Generator) countLineFast(n int, k0, step, lo, hi int64, hits []LineHit) (int, []LineHit, bool) {
	if !hasVec || n < lineVecMin {
		return 0, hits, false
	}
	b, h := g.countLineVector(n, k0, step, lo, hi, hits)
	return b, h, true
}

// countLineVector is CountLine on the vector kernel (hasVec must hold):
// whole blocks of 16 draws on the lanes, the rest on the scalar code.
func (g *Generator) countLineVector(n int, k0, step, lo, hi int64, hits []LineHit) (int, []LineHit) {
	var st vecState
	st.init(g)
	var ks [16]int64
	for t := range ks {
		ks[t] = k0 - lo - int64(t)*step
	}
	var ht [64]int64
	var hv [64]uint64
	blocks := n / 16
	below := 0
	for done := 0; done < blocks; {
		b, d, nh := countVec(&st, &ks, min(blocks-done, vecBlocks), lo, uint64(lo+hi), 16*step, int64(done)*16, &ht[0], &hv[0], len(ht))
		below += b
		done += d
		for k := range nh {
			hits = append(hits, LineHit{int(ht[k]), hv[k]})
		}
	}
	g.state = g.before(st.lane(0))
	t0 := blocks * 16
	if t0 == n {
		return below, hits
	}
	// The rest: the scalar loop on a line shifted to start at t0.
	n0 := len(hits)
	b, hits := g.countLineScalar(n-t0, k0-int64(t0)*step, step, lo, hi, hits)
	for k := n0; k < len(hits); k++ {
		hits[k].T += t0
	}
	return below + b, hits
}

// shuffleVec is skipVec for a shuffle that also moves data: it makes the
// steps i, i-1, … down to stop (1 <= stop <= i) and writes the swap
// partner j of each step, in order, to out (room for 32·blocks + 1
// values), returning how many it wrote (n). When i falls below stop it
// returns iOut < stop and the try at which it did (as skipVec's t);
// otherwise iOut and maskOut to go on with.
//
//go:noescape
func shuffleVec(st *vecState, i, mask, stop uint64, blocks int, out *uint32) (t, iOut, maskOut, n uint64)

// shuffleVecOut is how many swap partners one shuffleVec call writes at
// most (64 blocks: the buffer stays on the stack).
const shuffleVecOut = 64 * 32

// shuffleFast runs shuffleLoop's steps i … stop (has32 clear) on the
// vector kernel when the CPU has it and the run is long enough,
// reporting whether it did.
func shuffleFast[T int32 | int64](g *Generator, x []T, i, stop uint64) bool {
	if !hasVec || i < stop+skipVecMin {
		return false
	}
	shuffleVector(g, x, i, stop)
	return true
}

// shuffleVector is shuffleFast's work: the kernel finds the swap
// partners a block of draws at a time and the swaps follow in Go.
func shuffleVector[T int32 | int64](g *Generator, x []T, i, stop uint64) {
	var st vecState
	st.init(g)
	var js [shuffleVecOut + 1]uint32
	mask := uint64(1)<<bits.Len64(i) - 1
	for {
		t, ni, nm, n := shuffleVec(&st, i, mask, stop, shuffleVecOut/32, &js[0])
		for _, j := range js[:n] {
			x[i], x[j] = x[j], x[i]
			i--
		}
		if ni < stop {
			s := st.lane(int(t / 2))
			g.state = s
			if t%2 == 0 {
				g.buf, g.has32 = uint32(output(s)>>32), true
			}
			return
		}
		mask = nm
	}
}

// shuffleSwapFast makes Shuffle's steps i, i-1, …, 1 (i <= 2^32-1, has32
// clear) on the vector kernel when the CPU has it and the run is long
// enough, calling swap for each step in order; it reports whether it did.
func shuffleSwapFast(g *Generator, i uint64, swap func(i, j int)) bool {
	if !hasVec || i < 1+skipVecMin {
		return false
	}
	shuffleSwapVector(g, i, swap)
	return true
}

// shuffleSwapVector is shuffleVector with the swaps made by a callback.
func shuffleSwapVector(g *Generator, i uint64, swap func(i, j int)) {
	var st vecState
	st.init(g)
	var js [shuffleVecOut + 1]uint32
	mask := uint64(1)<<bits.Len64(i) - 1
	for {
		t, ni, nm, n := shuffleVec(&st, i, mask, 1, shuffleVecOut/32, &js[0])
		for _, j := range js[:n] {
			swap(int(i), int(j))
			i--
		}
		if ni < 1 {
			s := st.lane(int(t / 2))
			g.state = s
			if t%2 == 0 {
				g.buf, g.has32 = uint32(output(s)>>32), true
			}
			return
		}
		mask = nm
	}
}
