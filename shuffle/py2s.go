package shuffle

import (
	"sort"

	"github.com/sluicedata/sluice/nprand"
)

// py2s: units and their IDs shuffled by the run generator, split at node
// boundaries, then pieces and their IDs shuffled by the epoch generator.
type py2s struct {
	units    []span             // unit ID ranges in run-shuffled order
	runCk    []nprand.Generator // run generator before each unit's ID shuffle
	pieces   []piece            // final global order
	piecePos []int64            // len(pieces)+1
}

type piece struct {
	unit int   // index into units
	a, b int64 // range within the unit's run-shuffled IDs
	ck   nprand.Generator
}

func newPy2s(sizes []int64, n int64, ncn int, seed, epochSeed uint64) *py2s {
	s := &py2s{units: make([]span, len(sizes)), runCk: make([]nprand.Generator, len(sizes))}
	var o int64
	for i, z := range sizes {
		s.units[i] = span{o, o + z}
		o += z
	}
	run := nprand.New(seed)
	run.Shuffle(len(s.units), func(i, j int) { s.units[i], s.units[j] = s.units[j], s.units[i] })
	for i, u := range s.units {
		s.runCk[i] = *run
		run.SkipShuffle(int(u.size()))
	}
	epoch := nprand.New(epochSeed)
	idx := 0
	var taken, sofar int64 // taken: IDs of units[idx] already given to earlier parts
	s.pieces = make([]piece, 0, len(sizes)+ncn)
	for p := range ncn {
		end := partEnd(n, p+1, ncn)
		from := len(s.pieces)
		for idx < len(s.units) {
			left := s.units[idx].size() - taken
			if end < sofar+left {
				if sofar < end {
					split := end - sofar
					s.pieces = append(s.pieces, piece{unit: idx, a: taken, b: taken + split})
					taken += split
					sofar += split
				}
				break
			}
			s.pieces = append(s.pieces, piece{unit: idx, a: taken, b: taken + left})
			idx++
			taken = 0
			sofar += left
		}
		part := s.pieces[from:]
		epoch.Shuffle(len(part), func(i, j int) { part[i], part[j] = part[j], part[i] })
		for k := range part {
			part[k].ck = *epoch
			epoch.SkipShuffle(int(part[k].b - part[k].a))
		}
	}
	s.piecePos = make([]int64, len(s.pieces)+1)
	for k, pc := range s.pieces {
		s.piecePos[k+1] = s.piecePos[k] + pc.b - pc.a
	}
	return s
}

func (s *py2s) fill(dst []int64, pos int64) {
	k := sort.Search(len(s.pieces), func(k int) bool { return s.piecePos[k+1] > pos })
	var buf []int64
	for len(dst) > 0 {
		pc := s.pieces[k]
		buf = shuffledSpan(buf, s.units[pc.unit], s.runCk[pc.unit])
		ids := buf[pc.a:pc.b]
		g := pc.ck
		g.ShuffleInt64(ids)
		m := copy(dst, ids[pos-s.piecePos[k]:])
		dst = dst[m:]
		pos += int64(m)
		k++
	}
}
