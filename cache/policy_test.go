package cache

import (
	"slices"
	"testing"
)

// The order: unplanned (LRU) before foreign before planned (farthest
// first, then LRU); equal candidates keep their order.
func TestCompareCandidates(t *testing.T) {
	in := []Candidate{
		NewCandidate(true, 5, 1),
		NewCandidate(false, 0, 9),
		{Class: Foreign, Dist: Far, LastUse: 2},
		NewCandidate(true, 50, 7),
		NewCandidate(true, 50, 3),
		NewCandidate(false, 123, 4), // the distance of an unplanned shard is ignored
	}
	got := slices.Clone(in)
	slices.SortStableFunc(got, CompareCandidates)
	want := []Candidate{in[5], in[1], in[2], in[4], in[3], in[0]}
	if !slices.Equal(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
	if CompareCandidates(in[0], in[0]) != 0 {
		t.Error("a candidate is not equal to itself")
	}
}

func TestMayEvict(t *testing.T) {
	near, far := NewCandidate(true, 10, 0), NewCandidate(false, 0, 0)
	for _, tc := range []struct {
		c        Candidate
		distance int64
		demand   bool
		want     bool
	}{
		{near, 10, false, false}, // needed as soon as the prefetch's shard
		{near, 9, false, true},
		{near, 1 << 40, true, true}, // a demand fetch evicts anything
		{far, 1 << 40, false, true}, // unplanned: farther than any prefetch
	} {
		if got := MayEvict(tc.c, tc.distance, tc.demand); got != tc.want {
			t.Errorf("MayEvict(%+v, %d, %v) = %v, want %v", tc.c, tc.distance, tc.demand, got, tc.want)
		}
	}
	if Evictable(true, false, false) || Evictable(false, true, false) || Evictable(false, false, true) || !Evictable(false, false, false) {
		t.Error("Evictable: a leased, fetching or local-only shard must not be a candidate, any other must")
	}
}

func TestRefusals(t *testing.T) {
	var r Refusals
	if r.Refused(0, 0) {
		t.Fatal("the zero value refuses")
	}
	r.Note(3, 100)
	if !r.Refused(3, 100) || !r.Refused(3, 200) {
		t.Error("a prefetch needed no sooner, same generation, is not refused")
	}
	if r.Refused(3, 99) || r.Refused(4, 200) {
		t.Error("a prefetch needed sooner, or after a change, is refused")
	}
	r.Note(3, 150) // the sooner refusal is kept
	if !r.Refused(3, 120) {
		t.Error("a later refusal of the same generation replaced a sooner one")
	}
	r.Note(4, 150)
	if r.Refused(4, 120) || !r.Refused(4, 150) {
		t.Error("a refusal of a new generation did not replace the old one")
	}
}

type listVictims struct {
	cands   []Candidate
	size    int64
	evicted int
}

func (v *listVictims) First() (Candidate, bool) {
	if v.evicted >= len(v.cands) {
		return Candidate{}, false
	}
	return v.cands[v.evicted], true
}

func (v *listVictims) Evict() int64 { v.evicted++; return v.size }

// Evict stops at the bytes needed, at the end, or at the first candidate
// a prefetch may not evict.
func TestEvict(t *testing.T) {
	list := func() *listVictims {
		return &listVictims{size: 10, cands: []Candidate{
			NewCandidate(false, 0, 1), NewCandidate(true, 50, 2), NewCandidate(true, 20, 3), NewCandidate(true, 5, 4)}}
	}
	for _, tc := range []struct {
		need, distance int64
		demand         bool
		freed          int64
		evicted        int
	}{
		{15, 0, false, 20, 2},   // two are enough
		{100, 20, false, 20, 2}, // the third is needed as soon as the prefetch's shard
		{100, 20, true, 40, 4},  // a demand fetch takes all
		{0, 0, true, 0, 0},
	} {
		v := list()
		if got := Evict(v, tc.need, tc.distance, tc.demand); got != tc.freed || v.evicted != tc.evicted {
			t.Errorf("Evict(need %d, distance %d, demand %v) freed %d in %d, want %d in %d",
				tc.need, tc.distance, tc.demand, got, v.evicted, tc.freed, tc.evicted)
		}
	}
}
