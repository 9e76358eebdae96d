package shuffle_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicedata/sluice/partition"
	"github.com/sluicedata/sluice/shuffle"
)

// epochSteps composes a partition and a shuffle the way MosaicML's
// generate_work does for random batching, and returns, for every training
// step, the sorted sample IDs all ranks receive (padding dropped).
func epochSteps(t *testing.T, perm []int64, p partition.Params) [][]int64 {
	t.Helper()
	pt, err := partition.New(p)
	if err != nil {
		t.Fatal(err)
	}
	sh := pt.Shape()
	var out [][]int64
	for step := 0; ; step++ {
		w, b := step%sh.WorkersPerRank, step/sh.WorkersPerRank
		if b >= sh.BatchesPerWorker {
			return out
		}
		var ids []int64
		for n := range sh.Nodes {
			for r := range sh.RanksPerNode {
				for i := range sh.BatchSize {
					if x := pt.At(n, r, w, b, i); x >= 0 {
						ids = append(ids, perm[x])
					}
				}
			}
		}
		slices.Sort(ids)
		out = append(out, ids)
	}
}

// TestElasticOrder checks the invariants of an epoch plan over random shard
// sizes, seeds, algorithms, canonical node counts and physical shapes
// (nodes 1–8, ranks 1–8, workers 1–8): every shape with the same global
// batch consumes the same samples at every full step; every sample is
// delivered, exactly once when no padding is needed; and resuming at every
// step boundary, on any of the shapes, yields exactly the remaining steps.
func TestElasticOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 8))
	algos := []string{"py1e", "py1s", "py2s", "py1br", "naive", "py1b"}
	const g = 48 // global batch
	for it := range 36 {
		ncn := []int{1, 2, 4, 8}[r.IntN(4)]
		units := make([]int64, 1+r.IntN(20))
		var n int64
		for i := range units {
			units[i] = int64(1 + r.IntN(60))
			n += units[i]
		}
		if it%2 == 0 {
			// Make N a multiple of NCN·G: no short rows and no padding.
			units = append(units, int64(ncn*g)-n%int64(ncn*g))
			n += units[len(units)-1]
		}
		algo := algos[it%len(algos)]
		perm, err := shuffle.Get(shuffle.Params{Algo: algo, UnitSizes: units, NumCanonicalNodes: ncn,
			Seed: int64(r.IntN(1 << 20)), Epoch: int64(r.IntN(3)), BlockSize: int64(8 + r.IntN(200))})
		if err != nil {
			t.Fatal(err)
		}
		type shape struct{ p, r, w int }
		var shapes []shape
		for _, pp := range []int{1, 2, 4, 8} {
			for rr := 1; rr <= 8; rr++ {
				if ncn%pp == 0 && g%(pp*rr) == 0 {
					shapes = append(shapes, shape{pp, rr, 1 + r.IntN(8)})
				}
			}
		}
		full := int(n / g) // steps that need no padding
		if rows := (n + int64(ncn) - 1) / int64(ncn); n%int64(ncn) != 0 {
			full = int(rows*int64(ncn)/g) - 1
		}
		t.Run(fmt.Sprintf("%d/%s/N=%d/ncn=%d", it, algo, n, ncn), func(t *testing.T) {
			var base [][]int64
			for k, sh := range shapes {
				p := partition.Params{NumSamples: n, NumCanonicalNodes: ncn, NumPhysicalNodes: sh.p,
					RanksPerNode: sh.r, WorkersPerRank: sh.w, BatchSize: g / (sh.p * sh.r)}
				got := epochSteps(t, perm, p)
				if k == 0 {
					base = got
					seen := make(map[int64]int)
					for _, st := range got {
						for _, id := range st {
							seen[id]++
						}
					}
					if int64(len(seen)) != n {
						t.Fatalf("%d distinct samples delivered, want %d", len(seen), n)
					}
					if n%int64(ncn*g) == 0 {
						for id, c := range seen {
							if c != 1 {
								t.Fatalf("sample %d delivered %d times", id, c)
							}
						}
					}
				} else {
					for st := 0; st < full && st < len(got); st++ {
						if d := cmp.Diff(base[st], got[st]); d != "" {
							t.Fatalf("step %d differs between %+v and %+v (-first +this):\n%s", st, shapes[0], sh, d)
						}
					}
				}
				// Resume at every step boundary on the first shape, and at a
				// few random ones on the others.
				for kk := 1; kk < full; kk++ {
					if k > 0 && r.IntN(full) >= 4 {
						continue
					}
					p.DropFirst = int64(kk * g)
					res := epochSteps(t, perm, p)
					for st := 0; st+kk < full; st++ {
						if d := cmp.Diff(base[st+kk], res[st]); d != "" {
							t.Fatalf("resumed at step %d on %+v: step %d differs (-want +got):\n%s", kk, sh, st, d)
						}
					}
				}
			}
		})
	}
}
