package sim

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/sluicedata/sluice/cache"
	"github.com/sluicedata/sluice/plan"
)

// refNextUse is node.nextUse computed afresh: the plan's next use
// (Schedule.NextUse), and if a consumer read that run ahead, the next run
// of the shard not read.
func refNextUse(nd *node, shard int, pos int64) int64 {
	u := nd.sc.NextUse(int(nd.gid[shard]), pos)
	if u < 0 {
		return u
	}
	runs := nd.runs
	k := sort.Search(len(runs), func(k int) bool { return runs[k].Start()+runs[k].Len() > u })
	for k >= 0 && k < len(runs) && nd.consumed[k] {
		k = int(nd.nextSame[k])
	}
	if k < 0 || k >= len(runs) {
		return -1
	}
	return max(runs[k].Start(), pos)
}

// bruteVictim is the policy's choice by a scan of the whole cache, every
// distance computed afresh from the schedule (and the runs read): what the cache's evict does
// (sort all candidates) for one victim.
func bruteVictim(nd *node) (int, cache.Candidate) {
	best, bestKey := -1, cache.Candidate{}
	for sh, st := range nd.state {
		if st != present || nd.leased[sh] > 0 {
			continue
		}
		// The plan's next use, past the runs a consumer read ahead.
		u := refNextUse(nd, sh, nd.pos)
		k := cache.NewCandidate(u >= 0 && u-nd.pos <= nd.horizon, u-nd.pos, nd.lastUse[sh])
		if c := cache.CompareCandidates(k, bestKey); best < 0 || c < 0 || (c == 0 && nd.gid[sh] < nd.gid[best]) {
			best, bestKey = sh, k
		}
	}
	return best, bestKey
}

// The indexed heap of candidates picks, at every eviction, the victim a
// full scan by the cache's policy picks, over shuffles and shapes whose
// caches evict all the time.
func TestVictimsMatchFullScan(t *testing.T) {
	for _, tc := range []struct {
		name  string
		algo  string
		shape plan.Shape
		limit int64
		rank  bool
	}{
		{"py1e-2x2x2", plan.AlgoPy1e, plan.Shape{Nodes: 2, RanksPerNode: 2, WorkersPerRank: 2}, 40_000, false},
		{"py1s-1x1x1", plan.AlgoPy1s, plan.Shape{Nodes: 1, RanksPerNode: 1, WorkersPerRank: 1}, 8_000, true},
		// A cache of a third of the shards: candidates stay long enough to
		// come into the horizon from beyond it.
		{"py1s-1x1x1-roomy", plan.AlgoPy1s, plan.Shape{Nodes: 1, RanksPerNode: 1, WorkersPerRank: 1}, 200_000, true},
		{"py1b-1x4x1", plan.AlgoPy1b, plan.Shape{Nodes: 1, RanksPerNode: 4, WorkersPerRank: 1}, 30_000, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// More samples per node than the look-ahead horizon (1024 per
			// consumer): shards come into the horizon as the consumers move.
			sizes := make([]int64, 600)
			for i := range sizes {
				sizes[i] = int64(7 + i%5)
			}
			seed := int64(3)
			var evictions, checked, stale int
			c := &Config{
				Dataset:      UniformDataset(sizes, 100, 500),
				Plan:         plan.Options{BatchSize: 4, Shuffle: true, ShuffleAlgo: tc.algo, ShuffleSeed: &seed, ShuffleBlockSize: 4096},
				Shape:        tc.shape,
				RankIterator: tc.rank,
				Epochs:       2,
				Predownload:  8,
				CacheLimit:   tc.limit,
				Store:        Store{Latency: 5 * time.Millisecond, BandwidthPerNode: 1e5},
				StepTime:     Fixed(20 * time.Millisecond),
			}
			c.onEvict = func(nd *node, victim int) {
				evictions++
				want, wk := bruteVictim(nd)
				u := refNextUse(nd, victim, nd.pos)
				fresh := cache.NewCandidate(u >= 0 && u-nd.pos <= nd.horizon, u-nd.pos, nd.lastUse[victim])
				k := nd.vic.key[victim]
				if k.Class == cache.Planned {
					k.Dist -= nd.pos
				}
				if k != fresh {
					t.Errorf("node %d at %d: shard %d keyed %+v, afresh %+v", nd.id, nd.pos, victim, k, fresh)
				}
				// Every candidate's key, not only the victim's, is current.
				for _, sh := range nd.vic.all() {
					u := refNextUse(nd, int(sh), nd.pos)
					f := cache.NewCandidate(u >= 0 && u-nd.pos <= nd.horizon, u-nd.pos, nd.lastUse[sh])
					k := nd.vic.key[sh]
					if k.Class == cache.Planned {
						k.Dist -= nd.pos
					}
					if k != f {
						stale++
					}
				}
				if c := cache.CompareCandidates(fresh, wk); c != 0 || nd.gid[want] < nd.gid[victim] {
					t.Errorf("node %d at %d: evicts shard %d (%+v), a full scan %d (%+v)", nd.id, nd.pos, victim, fresh, want, wk)
				}
				checked++
			}
			if _, err := Run(context.Background(), c); err != nil {
				t.Fatal(err)
			}
			if stale > 0 {
				t.Errorf("%d stale candidate keys seen at evictions", stale)
			}
			if evictions < 20 {
				t.Fatalf("only %d evictions: the case does not exercise eviction", evictions)
			}
			t.Logf("%d evictions checked", checked)
		})
	}
}

// refTurnVictim is the victim where the workers take turns by a full scan
// of the cache, every distance computed afresh as the real cache does:
// each consumer's runs within its look-ahead from the start of the run it
// reads (stream.Iterator.NextUses), the nearest over the node's consumers;
// the candidates (present, unleased, unpinned: cache.Pinner) sorted by
// cache.CompareCandidates,
// stably in shard order. (The model's earlier orderedVictims, per eviction.)
func refTurnVictim(nd *node) (int, cache.Candidate, []int64) {
	dist := refTurnDists(nd)
	best, bestKey := -1, cache.Candidate{}
	for sh, st := range nd.state {
		if st != present || nd.leased[sh] > 0 || nd.pinned[sh] > 0 {
			continue
		}
		k := cache.NewCandidate(dist[sh] >= 0, dist[sh], nd.lastUse[sh])
		if c := cache.CompareCandidates(k, bestKey); best < 0 || c < 0 || (c == 0 && nd.gid[sh] < nd.gid[best]) {
			best, bestKey = sh, k
		}
	}
	return best, bestKey, dist
}

// refTurnDists is every shard's distance where the workers take turns
// (-1: unplanned) by a scan of every consumer's look-ahead (see
// refTurnVictim).
func refTurnDists(nd *node) []int64 {
	dist := make([]int64, len(nd.state))
	for i := range dist {
		dist[i] = -1
	}
	horizon := int64(max(2*nd.c.predownload(), 1024))
	for i := range nd.cons {
		cs := &nd.cons[i]
		end := min(cs.runPos+horizon, cs.n)
		var hint, runHint int
		for p := cs.runPos; p < end; {
			sh, e, ok := cs.shardAtHint(p, &hint, &runHint)
			if ok {
				if d := p - cs.runPos; dist[sh] < 0 || d < dist[sh] {
					dist[sh] = d
				}
			}
			p = max(e, p+1)
		}
	}
	return dist
}

// Where the workers take turns, the candidates kept as the windows slide
// (window.go) give at every eviction the victim a full scan by the real
// cache's distances gives, and every candidate's key in the heap is of its
// class and no nearer than its distance afresh (an upper bound).
func TestTurnVictimsMatchFullScan(t *testing.T) {
	for _, tc := range []struct {
		name  string
		algo  string
		shape plan.Shape
		limit int64
		pre   int
	}{
		{"py1s-1x1x2", plan.AlgoPy1s, plan.Shape{Nodes: 1, RanksPerNode: 1, WorkersPerRank: 2}, 8_000, 8},
		{"py1e-2x2x3", plan.AlgoPy1e, plan.Shape{Nodes: 2, RanksPerNode: 2, WorkersPerRank: 3}, 40_000, 8},
		{"py1e-1x2x4-roomy", plan.AlgoPy1e, plan.Shape{Nodes: 1, RanksPerNode: 2, WorkersPerRank: 4}, 200_000, 600},
		{"py1b-1x1x4", plan.AlgoPy1b, plan.Shape{Nodes: 1, RanksPerNode: 1, WorkersPerRank: 4}, 30_000, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// More samples per consumer than its look-ahead (1024, or
			// twice the predownload): runs come into the windows as the
			// consumers move.
			sizes := make([]int64, 600)
			for i := range sizes {
				sizes[i] = int64(7 + i%5)
			}
			seed := int64(3)
			var evictions, stale int
			c := &Config{
				Dataset:         UniformDataset(sizes, 100, 500),
				Plan:            plan.Options{BatchSize: 4, Shuffle: true, ShuffleAlgo: tc.algo, ShuffleSeed: &seed, ShuffleBlockSize: 4096},
				Shape:           tc.shape,
				Epochs:          2,
				Predownload:     tc.pre,
				CacheLimit:      tc.limit,
				Store:           Store{Latency: 5 * time.Millisecond, BandwidthPerNode: 1e5},
				StepTime:        Fixed(20 * time.Millisecond),
				OrderAdmissions: true,
			}
			c.onEvict = func(nd *node, victim int) {
				evictions++
				want, wk, dist := refTurnVictim(nd)
				if k := nd.vic.key[victim]; victim != want || k != wk {
					t.Errorf("node %d: evicts shard %d (%+v), a full scan %d (%+v)", nd.id, victim, k, want, wk)
				}
				for _, sh := range nd.vic.all() {
					// Against the scan, not turnKey: it notes a witness.
					k, f := nd.vic.key[sh], cache.NewCandidate(dist[sh] >= 0, dist[sh], nd.lastUse[sh])
					checkTurnList(t, nd, int(sh))
					if k.Class != f.Class || k.LastUse != f.LastUse || k.Dist < f.Dist {
						stale++
					}
				}
			}
			if _, err := Run(context.Background(), c); err != nil {
				t.Fatal(err)
			}
			if stale > 0 {
				t.Errorf("%d candidate keys below their distance afresh at evictions", stale)
			}
			if evictions < 20 {
				t.Fatalf("only %d evictions: the case does not exercise eviction", evictions)
			}
			t.Logf("%d evictions checked", evictions)
		})
	}
}

// checkTurnList checks shard sh's list of runs in the windows (window.go):
// its live count is its live runs, those before its head are dead, and
// its runs from the head are in the order of their starts.
func checkTurnList(t *testing.T, nd *node, sh int) {
	t.Helper()
	wl := &nd.wl[sh]
	live := 0
	for k, r := range wl.l {
		alive := int64(r.pos) >= nd.rpos[r.cons]
		if alive && k < int(wl.head) {
			t.Errorf("shard %d: run %+v alive before the list's head %d", sh, r, wl.head)
		}
		if alive {
			live++
		}
		if k > int(wl.head) && wl.l[k-1].pos > r.pos {
			t.Errorf("shard %d: run %+v after one starting at %d", sh, r, wl.l[k-1].pos)
		}
	}
	if int(wl.live) != live {
		t.Errorf("shard %d: %d live runs counted, %d in its list", sh, wl.live, live)
	}
}
