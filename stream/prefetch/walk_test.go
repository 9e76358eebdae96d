package prefetch

import (
	"math"
	"slices"
	"testing"
)

// plan is a list of shards per position (-1: padding) and a set of
// present shards.
type plan struct {
	shards  []int
	present map[int]bool
	stop    bool
}

func (p *plan) ShardAt(i int64) (int, int64, bool) {
	return p.shards[i], i + 1, p.shards[i] >= 0
}
func (p *plan) Present(s int) bool { return p.present[s] }
func (p *plan) Stop() bool         { return p.stop }

// drain fetches everything the walk names now, marking it present.
func drain(w *Walk, p *plan, pos int64, budget int) []int {
	var got []int
	for {
		at, s, ok := w.Next(p, pos, int64(len(p.shards)), budget)
		if !ok {
			return got
		}
		got = append(got, s)
		p.present[s] = true
		w.Fetched(at)
	}
}

func TestWalkWindowBudgetAndReach(t *testing.T) {
	p := &plan{shards: []int{0, 0, 1, -1, 1, 2, 2, 3, 4, 5}, present: map[int]bool{2: true}}
	w := New(8)
	// Window of 8 from 0: positions 0..7; shard 2 present, 1 seen twice.
	if got := drain(w, p, 0, math.MaxInt); !slices.Equal(got, []int{0, 1, 3}) {
		t.Fatalf("first walk %v, want [0 1 3]", got)
	}
	if w.Ahead() != 3 {
		t.Errorf("ahead %d, want 3", w.Ahead())
	}
	// The consumer reaches position 3: shards met at 0 and 2 are reached.
	if n := w.Sync(3); n != 2 {
		t.Errorf("reached %d, want 2", n)
	}
	if got := drain(w, p, 3, math.MaxInt); !slices.Equal(got, []int{4, 5}) {
		t.Errorf("second walk %v, want [4 5]", got)
	}
	// A budget of one shard ahead stops the walk at once.
	w = New(100)
	p.present = map[int]bool{}
	if got := drain(w, p, 0, FirstBudget(math.MaxInt)); !slices.Equal(got, []int{0}) {
		t.Errorf("budget 1 walk %v, want [0]", got)
	}
	p.stop = true
	w.Sync(0)
	if got := drain(w, p, 0, math.MaxInt); got != nil {
		t.Errorf("stopped walk fetched %v", got)
	}
}

// A refused fetch stops the walk; the next Sync resumes from the earliest
// refused position, even behind the walk's position.
func TestWalkRefuseResumes(t *testing.T) {
	p := &plan{shards: []int{0, 1, 2, 3, 4, 5}, present: map[int]bool{}}
	w := New(6)
	if got := drain(w, p, 0, math.MaxInt); len(got) != 6 {
		t.Fatalf("walk %v", got)
	}
	// Fetches of shards 2 and 4 were refused: not present after all.
	delete(p.present, 2)
	delete(p.present, 4)
	w.Refuse(4)
	w.Refuse(2)
	if !w.Refused() {
		t.Fatal("not refused")
	}
	if _, _, ok := w.Next(p, 0, 6, math.MaxInt); ok {
		t.Fatal("a refused walk names a shard before Sync")
	}
	w.Sync(1)
	if got := drain(w, p, 1, math.MaxInt); !slices.Equal(got, []int{2, 4}) {
		t.Errorf("resumed walk %v, want [2 4]", got)
	}
}

func TestBudget(t *testing.T) {
	if Budget(0, 10, 100, 4) != math.MaxInt || Budget(1000, 0, 0, 4) != math.MaxInt {
		t.Error("no limit or no sizes must be unbounded")
	}
	// (10_100-100)/100 = 100 slots, less 2 × 4, over 4 consumers: 23.
	if got := Budget(10_100, 100, 100, 4); got != 23 {
		t.Errorf("budget %d, want 23", got)
	}
	if got := Budget(500, 0, 100, 4); got != 0 {
		t.Errorf("tight budget %d, want 0", got)
	}
}

// BenchmarkWalk is the prefetcher's loop per shard named: no allocation
// once the ahead list has grown.
func BenchmarkWalk(b *testing.B) {
	p := &plan{shards: make([]int, 4096), present: map[int]bool{}}
	for i := range p.shards {
		p.shards[i] = i / 4
	}
	w := New(64)
	var pos int64
	b.ReportAllocs()
	for b.Loop() {
		at, _, ok := w.Next(p, pos, int64(len(p.shards)), 8)
		if ok {
			w.Fetched(at)
			continue
		}
		pos += 16
		if pos >= int64(len(p.shards)) {
			pos = 0
			w.Reset()
		}
		w.Sync(pos)
	}
}

// While a consumer's first sample is not out its walk is bounded to that
// sample's run: the first sample at or after from, padding passed over.
func TestFirstEnd(t *testing.T) {
	p := &firstPlan{shards: []int{-1, -1, 3, 3, 5}}
	for _, tc := range []struct{ from, n, want int64 }{
		{0, 5, 3}, {2, 5, 3}, {3, 5, 4}, {4, 5, 5}, {0, 2, 2}, {5, 5, 5},
	} {
		if got := FirstEnd(p, tc.from, tc.n); got != tc.want {
			t.Errorf("FirstEnd(from %d, n %d) = %d, want %d", tc.from, tc.n, got, tc.want)
		}
	}
	// The walk then names the first sample's shard only, even when it is
	// on its way and the consumer has moved past its position.
	w := New(100)
	w.Sync(3)
	if at, sh, ok := w.Next(p, 3, FirstEnd(p, 0, 5), 1); ok {
		t.Errorf("walk named shard %d at %d past the first sample's run", sh, at)
	}
}

// firstPlan is one shard per position (-1: padding), nothing present.
type firstPlan struct{ shards []int }

func (p *firstPlan) ShardAt(at int64) (int, int64, bool) {
	return p.shards[at], at + 1, p.shards[at] >= 0
}
func (p *firstPlan) Present(int) bool { return false }
func (p *firstPlan) Stop() bool       { return false }
