package partition_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/sluicedata/sluice/partition"
)

var errRef = errors.New("reference: invalid")

// refOrig is a literal, array-based transcription of spec §9.2, written
// independently of the package's per-element arithmetic.
func refOrig(n int64, c, p, r, w, b int, drop int64) ([5]int, []int64, error) {
	if (c < p && p%c != 0) || (p < c && c%p != 0) {
		return [5]int{}, nil, errRef
	}
	drop -= drop % int64(p)
	s := (n + int64(c) - 1) / int64(c)
	var ratio, pad int64
	if c < p {
		ratio = int64(p / c)
		if s%ratio != 0 {
			pad = ratio - s%ratio
		}
	}
	sp := s + pad
	m := make([][]int64, c)
	if n > int64(c) || (n == int64(c) && c >= p) {
		for k := range m {
			start, stop := int64(k)*n/int64(c), int64(k+1)*n/int64(c)
			row := make([]int64, sp)
			for j := range row {
				row[j] = start + int64(j)
			}
			if stop-start < s {
				row[s-1]--
			}
			if pad > 0 {
				src := s - pad - ratio + 1
				if src < 0 {
					return [5]int{}, nil, errRef
				}
				copy(row[s:], row[src:src+pad])
			}
			m[k] = row
		}
	} else {
		v := int64(0)
		for k := range m {
			m[k] = make([]int64, sp)
			for j := range m[k] {
				m[k][j] = v % n
				v++
			}
		}
	}
	var seq []int64
	for j := range sp {
		for k := range c {
			seq = append(seq, m[k][j])
		}
	}
	if drop < int64(len(seq)) {
		seq = seq[drop:]
	} else {
		seq = nil
	}
	nodes := make([][]int64, p)
	for i, v := range seq {
		nodes[i%p] = append(nodes[i%p], v)
	}
	for k := range nodes {
		l := len(nodes[k])
		if l%r != 0 {
			u := r - l%r
			var last []int64
			if r+u-1 <= l {
				last = slices.Clone(nodes[k][l-r-u+1 : l-r+1])
			} else {
				for i := range u {
					last = append(last, nodes[k][i%l])
				}
			}
			nodes[k] = append(nodes[k], last...)
		}
	}
	mr := len(nodes[0]) / r
	mrp := (mr + w*b - 1) / (w * b) * (w * b)
	nb := mrp / (w * b)
	var out []int64
	for k := range p {
		for rr := range r {
			rank := make([]int64, mrp)
			for t := range rank {
				rank[t] = -1
				if t < mr {
					rank[t] = nodes[k][t*r+rr]
				}
			}
			for ww := range w {
				for bb := range nb {
					out = append(out, rank[(bb*w+ww)*b:(bb*w+ww)*b+b]...)
				}
			}
		}
	}
	return [5]int{p, r, w, nb, b}, out, nil
}

func refGet(q partition.Params) ([5]int, []int64, error) {
	world := int64(q.NumPhysicalNodes * q.RanksPerNode)
	if q.NumSamples+world-q.NumSamples%world < q.DropFirst {
		return [5]int{}, nil, errRef
	}
	c, p := q.NumCanonicalNodes, q.NumPhysicalNodes
	if q.Algo == "orig" || q.InitialPhysicalNodes == 0 || (p <= c && c%p == 0) || (p > c && p%c == 0) {
		return refOrig(q.NumSamples, c, p, q.RanksPerNode, q.WorkersPerRank, q.BatchSize, q.DropFirst)
	}
	g := p * q.RanksPerNode * q.BatchSize
	d0 := q.InitialPhysicalNodes * q.RanksPerNode
	if g%d0 != 0 {
		return [5]int{}, nil, errRef
	}
	sh, ids, err := refOrig(q.NumSamples, c, q.InitialPhysicalNodes, q.RanksPerNode, q.WorkersPerRank, g/d0, q.DropFirst)
	if err != nil {
		return sh, nil, err
	}
	// Flatten in consumption order (batch, worker, node, rank, slot).
	var flat []int64
	at := func(n, r, w, b, i int) int64 {
		return ids[(((n*sh[1]+r)*sh[2]+w)*sh[3]+b)*sh[4]+i]
	}
	for b := range sh[3] {
		for w := range sh[2] {
			for n := range sh[0] {
				for r := range sh[1] {
					for i := range sh[4] {
						flat = append(flat, at(n, r, w, b, i))
					}
				}
			}
		}
	}
	P, R, W, B := p, q.RanksPerNode, q.WorkersPerRank, q.BatchSize
	nb := len(flat) / (W * P * R * B)
	out := make([]int64, len(flat))
	for b := range nb {
		for w := range W {
			for n := range P {
				for r := range R {
					for i := range B {
						src := (((b*W+w)*P+n)*R+r)*B + i
						dst := (((n*R+r)*W+w)*nb+b)*B + i
						out[dst] = flat[src]
					}
				}
			}
		}
	}
	return [5]int{P, R, W, nb, B}, out, nil
}

func randomParams(r *rand.Rand) partition.Params {
	p := partition.Params{
		NumSamples:       1 + r.Int64N(300),
		NumPhysicalNodes: 1 + r.IntN(8),
		RanksPerNode:     1 + r.IntN(8),
		WorkersPerRank:   1 + r.IntN(8),
		BatchSize:        1 + r.IntN(8),
	}
	if r.IntN(2) == 0 {
		p.Algo = "orig"
	}
	switch r.IntN(3) {
	case 0: // a multiple of P
		p.NumCanonicalNodes = p.NumPhysicalNodes * (1 + r.IntN(4))
	case 1: // a divisor of P
		ds := []int{}
		for d := 1; d <= p.NumPhysicalNodes; d++ {
			if p.NumPhysicalNodes%d == 0 {
				ds = append(ds, d)
			}
		}
		p.NumCanonicalNodes = ds[r.IntN(len(ds))]
	default:
		p.NumCanonicalNodes = 1 + r.IntN(12)
	}
	if r.IntN(3) == 0 {
		p.InitialPhysicalNodes = 1 + r.IntN(8)
	}
	if r.IntN(2) == 0 {
		p.DropFirst = r.Int64N(p.NumSamples + 2)
	}
	return p
}

// TestAgainstReference compares the per-element evaluation with the literal
// array transcription over random parameters, including error cases.
func TestAgainstReference(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 1))
	ok := 0
	for it := range 1500 {
		p := randomParams(r)
		wantShape, want, wantErr := refGet(p)
		gotShape, got, err := partition.Get(p)
		if (wantErr != nil) != (err != nil) {
			t.Fatalf("case %d %+v: error %v, reference error %v", it, p, err, wantErr)
		}
		if err != nil {
			if !errors.Is(err, partition.ErrInvalid) {
				t.Fatalf("case %d: error %v does not match ErrInvalid", it, err)
			}
			continue
		}
		ok++
		if gotShape.Dims() != wantShape {
			t.Fatalf("case %d %+v: shape %v, want %v", it, p, gotShape.Dims(), wantShape)
		}
		if d := cmp.Diff(want, got, cmpopts.EquateEmpty()); d != "" {
			t.Fatalf("case %d %+v (-want +got):\n%s", it, p, d)
		}
		if it%50 == 0 {
			checkAccessors(t, p, got)
		}
	}
	if ok < 500 {
		t.Fatalf("only %d valid random cases", ok)
	}
}

// steps returns, for each training step, the sorted entries all ranks
// consume at that step (rank batch t = worker t%W's batch t/W), without -1.
func steps(t *testing.T, p partition.Params) [][]int64 {
	t.Helper()
	pt, err := partition.New(p)
	if err != nil {
		t.Fatal(err)
	}
	s := pt.Shape()
	var out [][]int64
	for step := 0; ; step++ {
		w, b := step%s.WorkersPerRank, step/s.WorkersPerRank
		if b >= s.BatchesPerWorker {
			return out
		}
		var v []int64
		for n := range s.Nodes {
			for r := range s.RanksPerNode {
				for i := range s.BatchSize {
					if x := pt.At(n, r, w, b, i); x >= 0 {
						v = append(v, x)
					}
				}
			}
		}
		slices.Sort(v)
		out = append(out, v)
	}
}

// TestElasticDeterminism: with C fixed and the global batch G fixed, every
// physical shape (P dividing C) consumes the same samples at every full step,
// and a resumed run (drop_first = k·G, any shape) continues with exactly the
// steps the original run had left.
func TestElasticDeterminism(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 5))
	type shape struct{ p, r, w, b int }
	compared, resumed := 0, 0
	defer func() {
		if !t.Failed() && (compared < 100 || resumed < 20) {
			t.Errorf("too little coverage: %d steps compared across shapes, %d resumes", compared, resumed)
		}
	}()
	for it := range 40 {
		const g = 24 // global batch: 24 = P·R·B for many shapes
		ncn := []int{1, 2, 4, 8}[r.IntN(4)]
		n := int64(ncn*(1+r.IntN(20))) * int64(1+r.IntN(5))
		var shapes []shape
		for _, pp := range []int{1, 2, 4, 8} {
			if ncn%pp != 0 {
				continue
			}
			for _, rr := range []int{1, 2, 3, 4, 6, 8} {
				if g%(pp*rr) == 0 && g/(pp*rr) <= 24 {
					shapes = append(shapes, shape{pp, rr, 1 + r.IntN(8), g / (pp * rr)})
				}
			}
		}
		s := (n + int64(ncn) - 1) / int64(ncn)
		full := int(s * int64(ncn) / g) // steps with no padding at all
		var base [][]int64
		for k, sh := range shapes {
			p := partition.Params{NumSamples: n, NumCanonicalNodes: ncn, NumPhysicalNodes: sh.p,
				RanksPerNode: sh.r, WorkersPerRank: sh.w, BatchSize: sh.b}
			got := steps(t, p)
			if len(got) < full {
				t.Fatalf("it %d shape %+v: %d steps, want >= %d", it, sh, len(got), full)
			}
			if k == 0 {
				base = got
				// Exactly once: with N a multiple of C there are no short
				// rows, so full steps hold distinct samples, and together
				// with the rest every sample appears.
				if n%int64(ncn) == 0 {
					seen := map[int64]bool{}
					for _, st := range got[:full] {
						for _, v := range st {
							if seen[v] {
								t.Fatalf("it %d: sample %d delivered twice in full steps", it, v)
							}
							seen[v] = true
						}
					}
				}
				all := map[int64]bool{}
				for _, st := range got {
					for _, v := range st {
						all[v] = true
					}
				}
				if int64(len(all)) != n {
					t.Fatalf("it %d: %d distinct samples delivered, want %d", it, len(all), n)
				}
				continue
			}
			for st := range full {
				if d := cmp.Diff(base[st], got[st]); d != "" {
					t.Fatalf("it %d: step %d differs between %+v and %+v (-first +this):\n%s", it, st, shapes[0], sh, d)
				}
				compared++
			}
			// Resume on this shape after k' full steps of the first shape.
			if full > 1 {
				kk := 1 + r.IntN(full-1)
				p.DropFirst = int64(kk * g)
				res := steps(t, p)
				resumed++
				for st := 0; st+kk < full; st++ {
					if d := cmp.Diff(base[st+kk], res[st]); d != "" {
						t.Fatalf("it %d: resumed at step %d on %+v: step %d differs (-want +got):\n%s", it, kk, sh, st, d)
					}
				}
			}
		}
	}
}

// TestResumeEveryPosition: for every drop_first (a multiple of P), the
// resumed partition delivers exactly the canonical order from that point on
// (checked as a multiset of positions before padding).
func TestResumeEveryPosition(t *testing.T) {
	for _, tc := range []partition.Params{
		{NumSamples: 53, NumCanonicalNodes: 4, NumPhysicalNodes: 2, RanksPerNode: 2, WorkersPerRank: 3, BatchSize: 2},
		{NumSamples: 40, NumCanonicalNodes: 8, NumPhysicalNodes: 4, RanksPerNode: 1, WorkersPerRank: 2, BatchSize: 5},
		{NumSamples: 31, NumCanonicalNodes: 1, NumPhysicalNodes: 1, RanksPerNode: 3, WorkersPerRank: 2, BatchSize: 1},
	} {
		t.Run(fmt.Sprintf("N=%d/C=%d/P=%d", tc.NumSamples, tc.NumCanonicalNodes, tc.NumPhysicalNodes), func(t *testing.T) {
			_, fresh, err := refOrig(tc.NumSamples, tc.NumCanonicalNodes, 1, 1, 1, 1, 0)
			if err != nil {
				t.Fatal(err)
			}
			// fresh is the canonical order itself (one rank, batch 1).
			for drop := int64(0); drop <= int64(len(fresh)); drop += int64(tc.NumPhysicalNodes) {
				p := tc
				p.DropFirst = drop
				_, got, err := partition.Get(p)
				if err != nil {
					t.Fatalf("drop %d: %v", drop, err)
				}
				cnt := map[int64]int{}
				for _, v := range fresh[drop:] {
					cnt[v]++
				}
				for _, v := range got {
					if v >= 0 {
						cnt[v]--
					}
				}
				// Only rank padding may add entries; nothing may be missing.
				for v, c := range cnt {
					if c > 0 {
						t.Fatalf("drop %d: position %d missing %d time(s)", drop, v, c)
					}
				}
			}
		})
	}
}
