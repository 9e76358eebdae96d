package nprand

import "math/bits"

// partnersFast makes shufflePartners' steps i … stop (has32 clear) on
// the vector kernel when the CPU has it and the run is long enough,
// writing their partners to r in the order made, and reports whether it
// did.
func partnersFast(g *Generator, r []uint32, i, stop uint64) bool {
	if !hasVec || i < stop+skipVecMin {
		return false
	}
	var st vecState
	st.init(g)
	var js [shuffleVecOut + 1]uint32
	mask := uint64(1)<<bits.Len64(i) - 1
	for {
		t, ni, nm, n := shuffleVec(&st, i, mask, stop, shuffleVecOut/32, &js[0])
		r = r[copy(r, js[:n]):]
		i -= n
		if ni < stop {
			s := st.lane(int(t / 2))
			g.state = s
			if t%2 == 0 {
				g.buf, g.has32 = uint32(output(s)>>32), true
			}
			return true
		}
		mask = nm
	}
}
