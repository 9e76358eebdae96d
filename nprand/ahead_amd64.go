package nprand

// countTopVec is countTopScalar on 16 vector lanes for blocks blocks of 16
// draws: lane t compares top[16·block + t] << 37 with ks[t] (the line of
// its draw), d = value - ks[t]; it adds to below the d < 0 and stores the
// index (tBase + 16·block + t) of each d with uint64(d) < w in order into
// hitT (at most maxHits, checked before each block with one). After each
// block ks falls by step16. It returns below, the blocks done and the
// indices stored; it stops early only when the indices might not fit.
//
//go:noescape
func countTopVec(top *uint16, ks *[16]int64, blocks int, w uint64, step16, tBase int64, hitT *int64, maxHits int) (below, done, nHits int)

// fillTopVec makes groups groups of aheadEvery draws on st's lanes for
// fillTop: each draw's top 16 bits of 53 into top, and at the start of
// each group lane 0's limbs (the group's first state) into ck, 3 words a
// group. It leaves the lanes at the next draw.
//
//go:noescape
func fillTopVec(st *vecState, groups int, top *uint16, ck *uint64)

// fillTop is fillTopScalar, on the vector kernel for whole groups of
// aheadEvery draws when the CPU has it (at most aheadChunk draws a call).
func fillTop(top []uint16, ck []u128, s, inc u128) u128 {
	groups := min(len(top), aheadChunk) / aheadEvery
	if !hasVec || groups < 4 {
		return fillTopScalar(top, ck, s, inc)
	}
	var st vecState
	g := Generator{inc: inc}
	g.state = g.before(s)
	st.init(&g)
	var limbs [3 * aheadChunk / aheadEvery]uint64
	fillTopVec(&st, groups, &top[0], &limbs[0])
	for b := range groups {
		ck[b] = fromLimbs(limbs[3*b], limbs[3*b+1], limbs[3*b+2])
	}
	t0 := groups * aheadEvery
	return fillTopScalar(top[t0:], ck[groups:], st.lane(0), inc)
}

// countTop is countTopScalar, on the vector kernel for whole blocks of 16
// draws when the CPU has it.
func countTop(top []uint16, k, step int64, w uint64, und []LineHit) (int, []LineHit) {
	if !hasVec || len(top) < lineVecMin {
		return countTopScalar(top, k, step, w, und)
	}
	var ks [16]int64
	for t := range ks {
		ks[t] = k - int64(t)*step
	}
	var ht [64]int64
	blocks := len(top) / 16
	below := 0
	for done := 0; done < blocks; {
		b, d, nh := countTopVec(&top[done*16], &ks, min(blocks-done, vecBlocks), w, 16*step, int64(done)*16, &ht[0], len(ht))
		below += b
		done += d
		for _, t := range ht[:nh] {
			und = append(und, LineHit{T: int(t)})
		}
	}
	t0 := blocks * 16
	n0 := len(und)
	b, und := countTopScalar(top[t0:], k-int64(t0)*step, step, w, und)
	for x := n0; x < len(und); x++ {
		und[x].T += t0
	}
	return below + b, und
}
