package plan

import (
	"errors"
	"fmt"
	"math/bits"

	"github.com/sluicedata/sluice/partition"
	"github.com/sluicedata/sluice/shuffle"
)

// depError wraps an error of package partition or shuffle: its message
// gets this package's prefix, and it matches both ErrInvalid (when the
// dependency's error is an invalid argument) and the original error.
type depError struct{ err error }

func (e *depError) Error() string { return "plan: " + e.err.Error() }

func (e *depError) Unwrap() []error {
	if errors.Is(e.err, partition.ErrInvalid) || errors.Is(e.err, shuffle.ErrInvalid) {
		return []error{e.err, ErrInvalid}
	}
	return []error{e.err}
}

func wrapDep(err error) error { return &depError{err} }

// partSpec describes one get_partitions call.
type partSpec struct {
	algo                 string
	n                    int64
	ncn                  int
	shape                Shape
	batch                int
	dropFirst            int64
	initialPhysicalNodes int
}

func (ps partSpec) params() partition.Params {
	return partition.Params{Algo: ps.algo, NumSamples: ps.n, NumCanonicalNodes: ps.ncn,
		NumPhysicalNodes: ps.shape.Nodes, RanksPerNode: ps.shape.RanksPerNode, WorkersPerRank: ps.shape.WorkersPerRank,
		BatchSize: ps.batch, DropFirst: ps.dropFirst, InitialPhysicalNodes: ps.initialPhysicalNodes}
}

// newPartition prepares upstream's get_partitions without materialising it.
func newPartition(ps partSpec) (*partition.Partition, error) {
	pt, err := partition.New(ps.params())
	if err != nil {
		return nil, wrapDep(err)
	}
	return pt, nil
}

// partitionFull returns upstream's get_partitions array.
func partitionFull(algo string, n int64, ncn int, shape Shape, batch int, drop int64, ipn int) (work, error) {
	ps := partSpec{algo: algo, n: n, ncn: ncn, shape: shape, batch: batch, dropFirst: drop, initialPhysicalNodes: ipn}
	s, data, err := partition.Get(ps.params())
	if err != nil {
		return work{}, wrapDep(err)
	}
	return work{shape: s.Dims(), data: data}, nil
}

// shuffleFull returns upstream's get_shuffle permutation.
func shuffleFull(algo string, units []int64, ncn int, seed, epoch, block int64) ([]int64, error) {
	perm, err := shuffle.Get(shuffle.Params{Algo: algo, UnitSizes: units, NumCanonicalNodes: ncn,
		Seed: seed, Epoch: epoch, BlockSize: block})
	if err != nil {
		return nil, wrapDep(err)
	}
	return perm, nil
}

// permuter maps canonical positions to shuffled big IDs without
// materialising the permutation: it fills only the ranges of positions that
// are asked for.
type permuter struct {
	s      *shuffle.Shuffle
	chunk  int64 // positions filled per Fill call
	gather bool  // ask for the requested positions only (py1e: memory ∝ them)
}

func newPermuter(algo string, units []int64, ncn int, seed, epoch, block int64) (*permuter, error) {
	s, err := shuffle.New(shuffle.Params{Algo: algo, UnitSizes: units, NumCanonicalNodes: ncn,
		Seed: seed, Epoch: epoch, BlockSize: block})
	if err != nil {
		return nil, wrapDep(err)
	}
	// Fill's cost is the requested range plus the shuffle structures it
	// touches: whole units (py1s, py2s), blocks (py1br, py1b) or, for py1e,
	// a window of about a block on each side. Chunks span several of those
	// so the overhead stays small, and no more, so memory stays small.
	var maxUnit int64
	for _, u := range units {
		maxUnit = max(maxUnit, u)
	}
	chunk := int64(1 << 16)
	switch algo {
	case AlgoPy1e:
		// The shuffle's own window length: a shorter request pays the
		// window margins (about 2.5 blocks) more often.
		chunk = max(chunk, 4*block, s.ChunkHint())
	case AlgoPy1br, AlgoPy1b:
		chunk = max(chunk, 4*block)
	case AlgoPy1s, AlgoPy2s:
		chunk = max(chunk, 4*maxUnit)
	}
	return &permuter{s: s, chunk: chunk, gather: algo == AlgoPy1e}, nil
}

// apply replaces every position x ≥ 0 in ids by perm[x]. It buckets the
// positions by chunk (a counting sort, linear time) and fills each touched
// chunk once, so its cost is that of the touched chunks plus len(ids), and
// its memory one chunk plus len(ids).
func (p *permuter) apply(ids []int64) error {
	lo, hi := int64(-1), int64(-1)
	for _, x := range ids {
		if x < 0 {
			continue
		}
		if lo < 0 || x < lo {
			lo = x
		}
		hi = max(hi, x)
	}
	if lo < 0 {
		return nil
	}
	if hi >= p.s.Len() {
		return fmt.Errorf("plan: internal error: position %d outside the shuffle's %d", hi, p.s.Len())
	}
	chunk := p.chunk
	nChunks := (hi-lo)/chunk + 1
	if nChunks == 1 && !p.gather {
		buf := make([]int64, hi-lo+1)
		if err := p.s.Fill(buf, lo); err != nil {
			return err
		}
		for i, x := range ids {
			if x >= 0 {
				ids[i] = buf[x-lo]
			}
		}
		return nil
	}
	// Counting sort of the slots by chunk.
	start := make([]int32, nChunks+1)
	for _, x := range ids {
		if x >= 0 {
			start[(x-lo)/chunk+1]++
		}
	}
	for c := range nChunks {
		start[c+1] += start[c]
	}
	slots := make([]int32, start[nChunks])
	next := make([]int32, nChunks)
	copy(next, start[:nChunks])
	for i, x := range ids {
		if x >= 0 {
			c := (x - lo) / chunk
			slots[next[c]] = int32(i)
			next[c]++
		}
	}
	var buf []int64
	for c := range nChunks {
		if start[c] == start[c+1] {
			continue
		}
		// Fill only the part of the chunk between its lowest and highest
		// requested position.
		cl, ch := int64(-1), int64(-1)
		for _, i := range slots[start[c]:start[c+1]] {
			x := ids[i]
			if cl < 0 || x < cl {
				cl = x
			}
			ch = max(ch, x)
		}
		n := ch - cl + 1
		if p.gather {
			if err := p.gatherChunk(ids, slots[start[c]:start[c+1]], cl, n); err != nil {
				return err
			}
			continue
		}
		if int64(cap(buf)) < n {
			buf = make([]int64, n)
		}
		buf = buf[:n]
		if err := p.s.Fill(buf, cl); err != nil {
			return err
		}
		for _, i := range slots[start[c]:start[c+1]] {
			ids[i] = buf[ids[i]-cl]
		}
	}
	return nil
}

// gatherChunk maps the positions ids[i] (i in slots), all within
// [cl, cl+n), through Shuffle.Gather: a bitmap of the requested positions,
// their sample IDs compactly, and each slot's index among them from
// per-word prefix counts.
func (p *permuter) gatherChunk(ids []int64, slots []int32, cl, n int64) error {
	words := (n + 63) / 64
	want := make([]uint64, words)
	for _, i := range slots {
		b := ids[i] - cl
		want[b>>6] |= 1 << (b & 63)
	}
	prefix := make([]int32, words)
	var sel int32
	for w, x := range want {
		prefix[w] = sel
		sel += int32(bits.OnesCount64(x))
	}
	got := make([]int64, sel)
	if _, err := p.s.Gather(got, cl, n, want); err != nil {
		return wrapDep(err)
	}
	for _, i := range slots {
		b := ids[i] - cl
		ids[i] = got[prefix[b>>6]+int32(bits.OnesCount64(want[b>>6]&(1<<(b&63)-1)))]
	}
	return nil
}
