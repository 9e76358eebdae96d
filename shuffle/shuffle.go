package shuffle

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/sluicedata/sluice/nprand"
)

// Algorithm names, as MosaicML spells them.
const (
	Naive = "naive"
	Py1s  = "py1s"
	Py2s  = "py2s"
	Py1br = "py1br"
	Py1e  = "py1e"
	// Py1b is the fixed-block shuffle MosaicML removed in v0.11; it is
	// accepted so that old configurations keep their order.
	Py1b = "py1b"
)

// DefaultAlgo is upstream's default shuffle_algo.
const DefaultAlgo = Py1e

// ErrInvalid is matched (errors.Is) by every error caused by invalid Params.
var ErrInvalid = errors.New("shuffle: invalid argument")

// maxSamples bounds the epoch size so that positions fit comfortably in
// int64 arithmetic (n·(c+1) products use 128-bit math, offsets need headroom).
const maxSamples = 1 << 52

// maxPy1eBlock bounds py1e's block size so that its evaluation windows
// (a few block sizes) index with int32.
const maxPy1eBlock = 1 << 26

// ParseAlgo returns name if it is a known algorithm, "" meaning DefaultAlgo.
func ParseAlgo(name string) (string, error) {
	switch name {
	case "":
		return DefaultAlgo, nil
	case Naive, Py1s, Py2s, Py1br, Py1e, Py1b:
		return name, nil
	}
	return "", fmt.Errorf("%w: unknown shuffle algorithm %q (want naive, py1s, py2s, py1br, py1e or py1b)", ErrInvalid, name)
}

// DefaultBlockSize is upstream's shuffle_block_size default for ncn canonical
// nodes: max(4_000_000 // ncn, 1<<18).
func DefaultBlockSize(ncn int) int64 {
	if ncn < 1 {
		ncn = 1
	}
	return max(4_000_000/int64(ncn), 1<<18)
}

// DefaultNumCanonicalNodes is upstream's num_canonical_nodes default for an
// algorithm and a number of physical nodes: 64·P for py1s and py2s, P
// otherwise.
func DefaultNumCanonicalNodes(algo string, physicalNodes int) int {
	if algo == Py1s || algo == Py2s {
		return 64 * physicalNodes
	}
	return physicalNodes
}

// Params are the inputs of upstream's get_shuffle.
type Params struct {
	// Algo is the algorithm name; "" means py1e.
	Algo string
	// UnitSizes are the sample counts of the shuffle units, in global order.
	// Zero sizes are allowed (they still consume random draws, as upstream).
	UnitSizes []int64
	// NumCanonicalNodes must be ≥ 1.
	NumCanonicalNodes int
	// Seed is the run seed (shuffle_seed); it must be ≥ 0.
	Seed int64
	// Epoch is added to Seed for the epoch generator; it must be ≥ 0.
	Epoch int64
	// BlockSize is used by py1br, py1e and py1b; 0 means
	// DefaultBlockSize(NumCanonicalNodes).
	BlockSize int64
}

// Shuffle is a prepared epoch shuffle: a permutation of [0, Len()) that maps
// a position in the canonical order to the sample ID found there. Create it
// with New. It is immutable and safe for concurrent use.
type Shuffle struct {
	algo      string
	n         int64
	nodeStart []int64 // len ncn+1: canonical node c covers [nodeStart[c], nodeStart[c+1])
	impl      filler
}

// filler writes the sample IDs of positions [pos, pos+len(dst)); the range
// is validated by the caller.
type filler interface {
	fill(dst []int64, pos int64)
}

// Get returns the whole permutation for p, equal to upstream's get_shuffle.
func Get(p Params) ([]int64, error) {
	s, err := New(p)
	if err != nil {
		return nil, err
	}
	out := make([]int64, s.n)
	s.impl.fill(out, 0)
	return out, nil
}

// New validates p and prepares its shuffle. It replays the epoch's random
// draws once (no sample data) and records checkpoints; see the package
// documentation for the cost of each algorithm.
func New(p Params) (*Shuffle, error) {
	algo, err := ParseAlgo(p.Algo)
	if err != nil {
		return nil, err
	}
	if p.NumCanonicalNodes < 1 {
		return nil, fmt.Errorf("%w: num_canonical_nodes %d < 1", ErrInvalid, p.NumCanonicalNodes)
	}
	if p.Seed < 0 || p.Epoch < 0 {
		return nil, fmt.Errorf("%w: seed %d and epoch %d must be >= 0", ErrInvalid, p.Seed, p.Epoch)
	}
	if p.Seed > math.MaxInt64-p.Epoch {
		return nil, fmt.Errorf("%w: seed %d + epoch %d overflows", ErrInvalid, p.Seed, p.Epoch)
	}
	bs := p.BlockSize
	if bs == 0 {
		bs = DefaultBlockSize(p.NumCanonicalNodes)
	}
	if bs < 0 || bs > math.MaxInt32 {
		return nil, fmt.Errorf("%w: shuffle_block_size %d out of range", ErrInvalid, bs)
	}
	var n int64
	for i, z := range p.UnitSizes {
		if z < 0 {
			return nil, fmt.Errorf("%w: unit %d has negative size %d", ErrInvalid, i, z)
		}
		n += z
		if n > maxSamples {
			return nil, fmt.Errorf("%w: more than %d samples", ErrInvalid, int64(maxSamples))
		}
	}
	ncn := p.NumCanonicalNodes
	if int64(ncn) > max(n, 1)*64+1<<20 {
		// Guards the per-node tables against absurd node counts.
		return nil, fmt.Errorf("%w: num_canonical_nodes %d is far larger than the %d samples", ErrInvalid, ncn, n)
	}
	s := &Shuffle{algo: algo, n: n, nodeStart: make([]int64, ncn+1)}
	for c := range s.nodeStart {
		s.nodeStart[c] = partEnd(n, c, ncn)
	}
	seed, epochSeed := uint64(p.Seed), uint64(p.Seed+p.Epoch)
	switch algo {
	case Naive:
		s.impl = newNaive(n, epochSeed)
	case Py2s:
		s.impl = newPy2s(p.UnitSizes, n, ncn, seed, epochSeed)
	default:
		l := newLayout(p.UnitSizes, n, ncn, seed, epochSeed)
		lo, hi := int64(0.75*float64(bs)), int64(1.25*float64(bs))
		switch algo {
		case Py1s:
			s.impl = newPy1s(l)
		case Py1b:
			if bs < 1 {
				return nil, fmt.Errorf("%w: py1b needs shuffle_block_size >= 1", ErrInvalid)
			}
			s.impl = newPy1b(l, bs)
		case Py1br:
			if lo < 1 {
				return nil, fmt.Errorf("%w: py1br needs shuffle_block_size >= 2 (got %d)", ErrInvalid, bs)
			}
			s.impl = newPy1br(l, lo, hi)
		case Py1e:
			if hi <= lo || bs > maxPy1eBlock {
				return nil, fmt.Errorf("%w: py1e needs 1 <= shuffle_block_size <= %d (got %d)", ErrInvalid, maxPy1eBlock, bs)
			}
			for c := range ncn {
				if l.nodeSpan[c] == l.nodeSpan[c+1] || s.nodeStart[c] == s.nodeStart[c+1] {
					return nil, fmt.Errorf("%w: the number of samples assigned to canonical node %d is 0 (%d samples < %d canonical nodes)", ErrInvalid, c, n, ncn)
				}
			}
			s.impl = newPy1e(l, lo, hi)
		}
	}
	return s, nil
}

// Algo returns the resolved algorithm name.
func (s *Shuffle) Algo() string { return s.algo }

// Len returns the number of samples (positions) in the epoch.
func (s *Shuffle) Len() int64 { return s.n }

// NumCanonicalNodes returns the number of canonical nodes.
func (s *Shuffle) NumCanonicalNodes() int { return len(s.nodeStart) - 1 }

// NodeRange returns the positions [begin, end) of canonical node c
// (c·N/C to (c+1)·N/C, the same rows the partition uses). It panics if c is
// out of range.
func (s *Shuffle) NodeRange(c int) (begin, end int64) {
	return s.nodeStart[c], s.nodeStart[c+1]
}

// Fill writes the sample IDs at positions [pos, pos+len(dst)) into dst.
// For efficiency, request long contiguous ranges (see the package doc).
func (s *Shuffle) Fill(dst []int64, pos int64) error {
	if pos < 0 || pos > s.n || int64(len(dst)) > s.n-pos {
		return fmt.Errorf("%w: positions [%d, %d) outside [0, %d)", ErrInvalid, pos, pos+int64(len(dst)), s.n)
	}
	if len(dst) > 0 {
		s.impl.fill(dst, pos)
	}
	return nil
}

// ChunkHint returns a good length for Fill requests that walk a long range:
// for py1e, long enough that the window margins on both sides of each
// request (about 2.5 block sizes) add at most half of the work; for the
// other algorithms a size that keeps scratch memory small. Requests may be
// of any length; this only affects speed.
func (s *Shuffle) ChunkHint() int64 {
	if e, ok := s.impl.(*py1e); ok {
		// A bound, not the nodes' margins: those are drawn only when a
		// node is first used.
		return e.chunkSize(e.marginBound())
	}
	return 1 << 20
}

// At returns the sample ID at position pos. It is a convenience for single
// lookups; use Fill for ranges.
func (s *Shuffle) At(pos int64) (int64, error) {
	var v [1]int64
	if err := s.Fill(v[:], pos); err != nil {
		return 0, err
	}
	return v[0], nil
}

// partEnd returns n·(p)/c without overflow (upstream's part boundaries).
func partEnd(n int64, p, c int) int64 {
	hi, lo := bits.Mul64(uint64(n), uint64(p))
	q, _ := bits.Div64(hi, lo, uint64(c))
	return int64(q)
}

// span is a half-open range of sample IDs.
type span struct{ begin, end int64 }

func (s span) size() int64 { return s.end - s.begin }

// layout is the shared first stage of py1s, py1b, py1br and py1e: unit spans,
// run shuffle, divide_spans, per-node epoch shuffle of the span lists.
type layout struct {
	n        int64
	spans    []span  // global span list after the per-node epoch shuffle
	spanPos  []int64 // len(spans)+1: position where each span is laid out
	nodeSpan []int   // len(ncn)+1: node c owns spans[nodeSpan[c]:nodeSpan[c+1]]
	epoch    nprand.Generator
}

func newLayout(sizes []int64, n int64, ncn int, seed, epochSeed uint64) *layout {
	units := make([]span, len(sizes))
	var o int64
	for i, z := range sizes {
		units[i] = span{o, o + z}
		o += z
	}
	run := nprand.New(seed)
	run.Shuffle(len(units), func(i, j int) { units[i], units[j] = units[j], units[i] })
	l := &layout{n: n, nodeSpan: make([]int, ncn+1)}
	l.spans = make([]span, 0, len(units)+ncn)
	idx := 0
	var sofar int64
	for p := range ncn {
		end := partEnd(n, p+1, ncn)
		for idx < len(units) {
			sp := units[idx]
			if end < sofar+sp.size() {
				if sofar < end {
					split := end - sofar
					l.spans = append(l.spans, span{sp.begin, sp.begin + split})
					units[idx].begin += split
					sofar += split
				}
				break
			}
			l.spans = append(l.spans, sp)
			idx++
			sofar += sp.size()
		}
		l.nodeSpan[p+1] = len(l.spans)
	}
	l.epoch = *nprand.New(epochSeed)
	for p := range ncn {
		part := l.spans[l.nodeSpan[p]:l.nodeSpan[p+1]]
		l.epoch.Shuffle(len(part), func(i, j int) { part[i], part[j] = part[j], part[i] })
	}
	l.spanPos = make([]int64, len(l.spans)+1)
	for i, sp := range l.spans {
		l.spanPos[i+1] = l.spanPos[i] + sp.size()
	}
	return l
}

// spanAt returns the index of the span holding position pos (< n), skipping
// empty spans.
func (l *layout) spanAt(pos int64) int {
	// First span whose end position is > pos.
	return sort.Search(len(l.spans), func(i int) bool { return l.spanPos[i+1] > pos })
}

// fillIdentity writes the unshuffled laid-out IDs of positions
// [pos, pos+len(dst)).
func (l *layout) fillIdentity(dst []int64, pos int64) {
	i := l.spanAt(pos)
	for len(dst) > 0 {
		sp := l.spans[i]
		k := pos - l.spanPos[i]
		m := min(int64(len(dst)), sp.size()-k)
		for t := range m {
			dst[t] = sp.begin + k + t
		}
		dst = dst[m:]
		pos += m
		i++
	}
}

// naive: epochRNG.permutation(N), materialised.
type naive struct {
	p32 []int32
	p64 []int64
}

func newNaive(n int64, epochSeed uint64) *naive {
	g := nprand.New(epochSeed)
	if n <= math.MaxInt32 {
		p := make([]int32, n)
		for i := range p {
			p[i] = int32(i)
		}
		g.ShuffleInt32(p)
		return &naive{p32: p}
	}
	p := make([]int64, n)
	for i := range p {
		p[i] = int64(i)
	}
	g.ShuffleInt64(p)
	return &naive{p64: p}
}

func (s *naive) fill(dst []int64, pos int64) {
	if s.p64 != nil {
		copy(dst, s.p64[pos:])
		return
	}
	for i, v := range s.p32[pos : pos+int64(len(dst))] {
		dst[i] = int64(v)
	}
}

// py1s: each span's IDs shuffled in place with the epoch generator.
// The checkpoints are drawn per canonical node on first use, in order (the
// generator runs through the nodes in order), so a low node's first fill
// does not replay the whole epoch.
type py1s struct {
	l  *layout
	ck []nprand.Generator // epoch generator before each span's shuffle
	lz lazyNodes
}

func newPy1s(l *layout) *py1s {
	s := &py1s{l: l, ck: make([]nprand.Generator, len(l.spans))}
	g := l.epoch
	s.lz.prepare = func(c int) {
		for i := l.nodeSpan[c]; i < l.nodeSpan[c+1]; i++ {
			s.ck[i] = g
			g.SkipShuffle(int(l.spans[i].size()))
		}
	}
	return s
}

// lazyNodes prepares canonical nodes 0..c on demand, in order, once.
type lazyNodes struct {
	mu       sync.Mutex
	prepared atomic.Int32
	prepare  func(c int) // called under mu for c = prepared, prepared+1, ...
}

func (z *lazyNodes) ready(c int) {
	if int(z.prepared.Load()) > c {
		return
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	for n := int(z.prepared.Load()); n <= c; n++ {
		z.prepare(n)
		z.prepared.Store(int32(n + 1))
	}
}

// nodeAt returns the canonical node holding position pos (< n).
func (l *layout) nodeAt(pos int64) int {
	return sort.Search(len(l.nodeSpan)-1, func(c int) bool { return l.spanPos[l.nodeSpan[c+1]] > pos })
}

// shuffledSpan returns span sp's IDs shuffled with a copy of g, in buf.
func shuffledSpan(buf []int64, sp span, g nprand.Generator) []int64 {
	buf = buf[:0]
	for v := sp.begin; v < sp.end; v++ {
		buf = append(buf, v)
	}
	g.ShuffleInt64(buf)
	return buf
}

// shuffledSpanTail is shuffledSpan where only buf[from:] is needed: the
// shuffle stops once those entries are settled (about half the work for a
// random from), and the entries before from are not meaningful.
func shuffledSpanTail(buf []int64, sp span, g nprand.Generator, from int64) []int64 {
	z := max(sp.end-sp.begin, 0)
	buf = slices.Grow(buf[:0], int(z))[:z]
	for k := range buf {
		buf[k] = sp.begin + int64(k)
	}
	g.ShuffleInt64Tail(buf, int(from))
	return buf
}

func (s *py1s) fill(dst []int64, pos int64) {
	l := s.l
	s.lz.ready(l.nodeAt(pos + int64(len(dst)) - 1))
	i := l.spanAt(pos)
	var buf []int64
	for len(dst) > 0 {
		k := pos - l.spanPos[i]
		buf = shuffledSpanTail(buf, l.spans[i], s.ck[i], k)
		m := copy(dst, buf[k:])
		dst = dst[m:]
		pos += int64(m)
		i++
	}
}

// blocks is the shared machinery of py1b and py1br: ranges of positions
// shuffled in order with the epoch generator, grouped into chains of
// overlapping blocks that must be replayed together.
type blocks struct {
	l      *layout
	start  []int64 // block ranges, in shuffle order
	stop   []int64
	ck     []nprand.Generator // epoch generator before each block's shuffle
	chain  []int              // chain index of each block
	cStart []int64            // chain k covers positions [cStart[k], cStop[k])
	cStop  []int64
	cFirst []int // first block of chain k; chain k's blocks are cFirst[k]..cFirst[k+1]-1

	// Nodes are laid out in blocks and checkpointed on first use, in order
	// (prepare appends node c's blocks); mu also guards the slices above
	// while a node is appended (fill reads a snapshot of them).
	mu       sync.Mutex
	prepared int
	prepare  func(c int)
}

// ready lays out nodes 0..c if they are not yet and returns the blocks
// (a consistent snapshot: later nodes only append).
func (b *blocks) ready(c int) blocks {
	b.mu.Lock()
	defer b.mu.Unlock()
	for ; b.prepared <= c; b.prepared++ {
		b.prepare(b.prepared)
	}
	return blocks{l: b.l, start: b.start, stop: b.stop, ck: b.ck, chain: b.chain, cStart: b.cStart, cStop: b.cStop, cFirst: b.cFirst}
}

// add records a block; blocks of one node must be added in shuffle order and
// nodes in order, so that chains are contiguous.
func (b *blocks) add(start, stop int64) {
	k := len(b.cStart) - 1
	if k < 0 || start >= b.cStop[k] || start < b.cStart[k] {
		b.cStart = append(b.cStart, start)
		b.cStop = append(b.cStop, stop)
		b.cFirst = append(b.cFirst, len(b.start))
		k++
	} else {
		b.cStop[k] = max(b.cStop[k], stop)
	}
	b.start = append(b.start, start)
	b.stop = append(b.stop, stop)
	b.chain = append(b.chain, k)
}

// checkpoint replays the block shuffles of blocks [from, len) with g.
func (b *blocks) checkpoint(from int, g *nprand.Generator) {
	for i := from; i < len(b.start); i++ {
		b.ck = append(b.ck, *g)
		g.SkipShuffle(int(b.stop[i] - b.start[i]))
	}
}

func (b *blocks) fill(dst []int64, pos int64) {
	v := b.ready(b.l.nodeAt(pos + int64(len(dst)) - 1))
	v.fillReady(dst, pos)
}

// fillReady is fill on a snapshot whose nodes cover [pos, pos+len(dst)).
func (b *blocks) fillReady(dst []int64, pos int64) {
	b.l.fillIdentity(dst, pos)
	end := pos + int64(len(dst))
	// First chain that may overlap: last chain starting at or before pos.
	k := sort.Search(len(b.cStart), func(i int) bool { return b.cStart[i] > pos }) - 1
	k = max(k, 0)
	var buf []int64
	for ; k < len(b.cStart) && b.cStart[k] < end; k++ {
		cs, ce := b.cStart[k], b.cStop[k]
		if ce <= pos {
			continue
		}
		if cap(buf) < int(ce-cs) {
			buf = make([]int64, ce-cs)
		}
		buf = buf[:ce-cs]
		b.l.fillIdentity(buf, cs)
		last := len(b.start)
		if k+1 < len(b.cFirst) {
			last = b.cFirst[k+1]
		}
		for i := b.cFirst[k]; i < last; i++ {
			g := b.ck[i]
			g.ShuffleInt64(buf[b.start[i]-cs : b.stop[i]-cs])
		}
		lo, hi := max(cs, pos), min(ce, end)
		copy(dst[lo-pos:hi-pos], buf[lo-cs:hi-cs])
	}
}

func newPy1b(l *layout, bs int64) *blocks {
	b := &blocks{l: l}
	g := l.epoch
	b.prepare = func(c int) {
		ns, nstop := l.spanPos[l.nodeSpan[c]], l.spanPos[l.nodeSpan[c+1]]
		from := len(b.start)
		for st := ns; st < nstop; st += bs {
			b.add(st, min(st+bs, nstop))
		}
		b.checkpoint(from, &g)
	}
	return b
}

func newPy1br(l *layout, lo, hi int64) *blocks {
	b := &blocks{l: l}
	g := l.epoch
	ncn := len(l.nodeSpan) - 1
	stagger := make([]int64, ncn)
	for c := range stagger {
		stagger[c] = int64(g.Bounded(uint64(lo - 1)))
	}
	b.prepare = func(c int) {
		ns, nstop := l.spanPos[l.nodeSpan[c]], l.spanPos[l.nodeSpan[c+1]]
		from := len(b.start)
		s := stagger[c]
		for end := ns; end < nstop; {
			r := lo + int64(g.Bounded(uint64(hi-1-lo)))
			bstart := max(end-s, ns)
			bstop := min(end+r-s, nstop)
			b.add(bstart, bstop)
			end += bstop - bstart
		}
		b.checkpoint(from, &g)
	}
	return b
}
