package nprand

import "math/bits"

// u128 is an unsigned 128-bit integer.
type u128 struct{ hi, lo uint64 }

func add128(a, b u128) u128 {
	lo, c := bits.Add64(a.lo, b.lo, 0)
	hi, _ := bits.Add64(a.hi, b.hi, c)
	return u128{hi, lo}
}

func mul128(a, b u128) u128 {
	hi, lo := bits.Mul64(a.lo, b.lo)
	hi += a.hi*b.lo + a.lo*b.hi
	return u128{hi, lo}
}

// pcgMult is PCG64's 128-bit LCG multiplier.
var pcgMult = u128{0x2360ed051fc65da4, 0x4385df649fccf645}

// Generator is numpy's Generator(PCG64) restricted to the methods Streaming
// uses. The zero value is not a valid generator; use New.
type Generator struct {
	state u128
	inc   u128
	// buf holds the upper half of the last 64-bit draw when has32 is set
	// (numpy's has_uint32/uinteger): next32 returns it before drawing again.
	buf   uint32
	has32 bool
}

// SeedWords returns the four 64-bit words numpy's SeedSequence(seed)
// generates for seeding PCG64 (spec A.1), and the mixed entropy pool.
// It is exported for tests and diagnostics.
func SeedWords(seed uint64) (s [4]uint64, pool [4]uint32) {
	const (
		initA = 0x43b0d7e5
		multA = 0x931e8875
		initB = 0x8b51f9dd
		multB = 0x58f38ded
		mixL  = 0xca01f9dd
		mixR  = 0x4973f715
	)
	entropy := []uint32{uint32(seed)}
	if seed>>32 != 0 {
		entropy = append(entropy, uint32(seed>>32))
	}
	h := uint32(initA)
	hashmix := func(v uint32) uint32 {
		v ^= h
		h *= multA
		v *= h
		v ^= v >> 16
		return v
	}
	mix := func(x, y uint32) uint32 {
		r := mixL*x - mixR*y
		return r ^ (r >> 16)
	}
	for i := range pool {
		var e uint32
		if i < len(entropy) {
			e = entropy[i]
		}
		pool[i] = hashmix(e)
	}
	for src := range pool {
		for dst := range pool {
			if src != dst {
				pool[dst] = mix(pool[dst], hashmix(pool[src]))
			}
		}
	}
	// A uint64 seed has at most two entropy words, so the loop over
	// additional words (index >= 4) of spec A.1 step 3 never runs.
	hb := uint32(initB)
	var w [8]uint32
	for i := range w {
		v := pool[i%4]
		v ^= hb
		hb *= multB
		v *= hb
		v ^= v >> 16
		w[i] = v
	}
	for k := range s {
		s[k] = uint64(w[2*k]) | uint64(w[2*k+1])<<32
	}
	return s, pool
}

// New returns a generator equal to numpy.random.default_rng(seed).
func New(seed uint64) *Generator {
	s, _ := SeedWords(seed)
	g := &Generator{}
	initstate := u128{s[0], s[1]}
	initseq := u128{s[2], s[3]}
	g.inc = u128{initseq.hi<<1 | initseq.lo>>63, initseq.lo<<1 | 1}
	g.step()
	g.state = add128(g.state, initstate)
	g.step()
	return g
}

func (g *Generator) step() {
	g.state = add128(mul128(g.state, pcgMult), g.inc)
}

// State returns the 128-bit LCG state and increment as (hi, lo) pairs, for
// tests and diagnostics.
func (g *Generator) State() (stateHi, stateLo, incHi, incLo uint64) {
	return g.state.hi, g.state.lo, g.inc.hi, g.inc.lo
}

// Uint64 returns the next 64-bit output (numpy next_uint64). It neither uses
// nor clears the buffered 32-bit half.
func (g *Generator) Uint64() uint64 {
	// Inline step: state = state*mult + inc (mod 2^128).
	hi, lo := bits.Mul64(g.state.lo, pcgMult.lo)
	hi += g.state.hi*pcgMult.lo + g.state.lo*pcgMult.hi
	lo, c := bits.Add64(lo, g.inc.lo, 0)
	hi, _ = bits.Add64(hi, g.inc.hi, c)
	g.state = u128{hi, lo}
	return bits.RotateLeft64(hi^lo, -int(hi>>58))
}

// Uint32 returns the next 32-bit output (numpy next_uint32): the saved upper
// half of an earlier 64-bit draw if there is one, else the lower half of a new
// 64-bit draw, saving its upper half.
func (g *Generator) Uint32() uint32 {
	if g.has32 {
		g.has32 = false
		return g.buf
	}
	x := g.Uint64()
	g.buf = uint32(x >> 32)
	g.has32 = true
	return uint32(x)
}

// Float64 returns a double in [0, 1) built from the top 53 bits of a 64-bit
// draw (numpy next_double).
func (g *Generator) Float64() float64 {
	return float64(int64(g.Uint64()>>11)) * (1.0 / 9007199254740992.0) // int64: a plain conversion (the value is < 2^53)
}

// Jump is Advance(n) for one stream, computed once: the map x -> m·x + c
// that n steps of the LCG make. A resume advances past every span of an
// epoch, mostly spans of one size, so the map is reused.
type Jump struct {
	n, incHi, incLo uint64
	m, c            u128
}

// JumpOf returns the jump of n steps on g's stream.
func (g *Generator) JumpOf(n uint64) Jump {
	h := Generator{state: u128{0, 0}, inc: g.inc}
	h.Advance(n) // from state 0: the addend
	k := Generator{state: u128{0, 1}, inc: g.inc}
	k.Advance(n) // from state 1: multiplier + addend
	m := u128{}
	m.lo, m.hi = k.state.lo-h.state.lo, k.state.hi-h.state.hi
	if k.state.lo < h.state.lo {
		m.hi--
	}
	return Jump{n: n, incHi: g.inc.hi, incLo: g.inc.lo, m: m, c: h.state}
}

// Steps returns the number of steps j makes.
func (j *Jump) Steps() uint64 { return j.n }

// AdvanceJump is Advance(j's n) when j is for g's stream (else it
// computes that Advance).
func (g *Generator) AdvanceJump(j *Jump) {
	if j.incHi != g.inc.hi || j.incLo != g.inc.lo {
		g.Advance(j.n)
		return
	}
	g.state = add128(mul128(j.m, g.state), j.c)
}

// Advance moves the generator n steps ahead in O(log n), as if Uint64 had
// been called n times. The buffered 32-bit half is left as it is (numpy's
// PCG64.advance clears it; callers here use Advance only to skip runs of
// 64-bit draws inside a method, which never touch the buffer).
func (g *Generator) Advance(n uint64) {
	// Brown's algorithm: compose the affine map x -> m*x + c with itself.
	accMult := u128{0, 1}
	accPlus := u128{}
	curMult := pcgMult
	curPlus := g.inc
	for n > 0 {
		if n&1 != 0 {
			accMult = mul128(accMult, curMult)
			accPlus = add128(mul128(accPlus, curMult), curPlus)
		}
		curPlus = mul128(add128(curMult, u128{0, 1}), curPlus)
		curMult = mul128(curMult, curMult)
		n >>= 1
	}
	g.state = add128(mul128(accMult, g.state), accPlus)
}
