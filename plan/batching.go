package plan

import (
	"fmt"
	"math"
	"sort"

	"github.com/sluicedata/sluice/nprand"
)

// work is a (P, R, W, nb, B) arrangement stored flat in C order, with -1 as
// padding: generate_work's output.
type work struct {
	shape [5]int
	data  []int64
}

func (a *work) index(p, r, w, b, i int) int {
	s := a.shape
	return (((p*s[1]+r)*s[2]+w)*s[3]+b)*s[4] + i
}

// consumption flattens a in consumption order: batch-per-worker, worker,
// node, rank, position (numpy transpose(3, 2, 0, 1, 4)).
func (a *work) consumption() []int64 {
	s := a.shape
	out := make([]int64, 0, len(a.data))
	for b := 0; b < s[3]; b++ {
		for w := 0; w < s[2]; w++ {
			for p := 0; p < s[0]; p++ {
				for r := 0; r < s[1]; r++ {
					base := a.index(p, r, w, b, 0)
					out = append(out, a.data[base:base+s[4]]...)
				}
			}
		}
	}
	return out
}

// dealGlobalBatches turns a list of global batches (each of G = P·R·B
// entries, in consumption order) into the (P, R, W, nb, B) arrangement,
// after dropping the first `skip` batches and padding with all -1 batches to
// a multiple of W global batches (spec §12.2 steps 4–6).
func dealGlobalBatches(flat []int64, shape Shape, batch int, skip int64) work {
	P, R, W, B := shape.Nodes, shape.RanksPerNode, shape.WorkersPerRank, batch
	G := P * R * B
	nBatches := int64(len(flat) / G)
	if skip > nBatches {
		skip = nBatches
	}
	flat = flat[skip*int64(G):]
	n := len(flat) / G
	if rem := n % W; rem != 0 {
		n += W - rem
	}
	nb := n / W
	a := work{shape: [5]int{P, R, W, nb, B}, data: make([]int64, n*G)}
	n0 := len(flat) / G
	for t := 0; t < n; t++ {
		w, b := t%W, t/W
		for p := 0; p < P; p++ {
			for r := 0; r < R; r++ {
				dst := a.data[a.index(p, r, w, b, 0):][:B]
				if t >= n0 {
					for i := range dst {
						dst[i] = -1
					}
					continue
				}
				copy(dst, flat[t*G+(p*R+r)*B:][:B])
			}
		}
	}
	return a
}

// streamWork partitions, shuffles and maps one stream for the non-random
// batching methods: the stream's arrangement over (P, R, W, B), holding
// global sample IDs.
func (p *Planner) streamWork(c *epochConfig, stream int, shape Shape, batch int) (work, error) {
	rs, err := p.resample(c, stream)
	if err != nil {
		return work{}, err
	}
	n := rs.total()
	if n > maxMaterialised/2 {
		return work{}, fmt.Errorf("%w: stream %d: %d samples per epoch is more than %s batching can arrange", ErrInvalid, stream, n, c.batchingMethod)
	}
	a, err := partitionFull(c.partitionAlgo, n, c.ncn, shape, batch, 0, c.initialPhysicalNodes)
	if err != nil {
		return work{}, fmt.Errorf("stream %d: %w", stream, err)
	}
	var perm []int64
	if c.shuffle {
		block := int64(float64(c.blockSize) * p.streams[stream].proportion)
		if block <= 0 {
			switch c.shuffleAlgo {
			case AlgoPy1e, AlgoPy1br, AlgoPy1b:
				return work{}, fmt.Errorf("%w: stream %d: shuffle block portion %d (shuffle_block_size %d × proportion %v) must be positive for %s",
					ErrInvalid, stream, block, c.blockSize, p.streams[stream].proportion, c.shuffleAlgo)
			}
			block = 1 // unused by the algorithm (0 would mean "default" to package shuffle)
		}
		perm, err = shuffleFull(c.shuffleAlgo, rs.unitSizes(), c.ncn, c.seed, c.epoch, block)
		if err != nil {
			return work{}, fmt.Errorf("stream %d: %w", stream, err)
		}
	}
	for i, x := range a.data {
		if x < 0 {
			continue
		}
		if perm != nil {
			x = perm[x]
		}
		a.data[i] = rs.at(x)
	}
	return a, nil
}

// fullRows cuts flat into rows of size k and returns how many rows hold no
// -1 (numpy count_nonzero(min(rows, axis=1) >= 0)); a partial last row is
// not counted.
func fullRows(flat []int64, k int) int {
	n := 0
	for r := 0; (r+1)*k <= len(flat); r++ {
		ok := true
		for _, x := range flat[r*k : (r+1)*k] {
			if x < 0 {
				ok = false
				break
			}
		}
		if ok {
			n++
		}
	}
	return n
}

// originsOrder interleaves per-source batch counts: origins is counts[0]
// zeros, counts[1] ones, … shuffled by the generator; the result lists, for
// each output slot, (source, index within source).
func originsOrder(g *nprand.Generator, counts []int) [][2]int {
	var origins []int64
	for s, c := range counts {
		for range c {
			origins = append(origins, int64(s))
		}
	}
	g.ShuffleInt64(origins)
	next := make([]int, len(counts))
	out := make([][2]int, len(origins))
	for t, s := range origins {
		out[t] = [2]int{int(s), next[s]}
		next[s]++
	}
	return out
}

// perStreamWork implements batching_method per_stream (spec §12.2).
func (p *Planner) perStreamWork(c *epochConfig) (work, error) {
	shape, B := c.shape, c.batchSize
	G := shape.NumRanks() * B
	var batches [][]int64 // kept global batches per stream, concatenated
	counts := make([]int, len(p.streams))
	for s := range p.streams {
		a, err := p.streamWork(c, s, shape, B)
		if err != nil {
			return work{}, err
		}
		flat := a.consumption()
		f := fullRows(flat, G)
		if f == 0 {
			return work{}, fmt.Errorf("%w: per_stream batching: stream %d cannot fill one global batch of %d samples", ErrInvalid, s, G)
		}
		counts[s] = f
		batches = append(batches, flat[:f*G])
	}
	order := originsOrder(c.batchRNG(), counts)
	flat := make([]int64, 0, len(order)*G)
	for _, o := range order {
		flat = append(flat, batches[o[0]][o[1]*G:(o[1]+1)*G]...)
	}
	return dealGlobalBatches(flat, shape, B, c.sampleInEpoch/int64(G)), nil
}

// stratifiedWork implements batching_method stratified (spec §12.3).
func (p *Planner) stratifiedWork(c *epochConfig) (work, error) {
	shape, B := c.shape, c.batchSize
	G := shape.NumRanks() * B
	portions := make([]int, len(p.streams))
	left := make([]float64, len(p.streams))
	sum := 0
	for s, st := range p.streams {
		portions[s] = int(st.proportion * float64(G))
		left[s] = float64(G)*st.proportion - float64(portions[s])
		sum += portions[s]
	}
	if missing := G - sum; missing > 0 {
		idx := make([]int, len(p.streams))
		for i := range idx {
			idx[i] = i
		}
		sort.SliceStable(idx, func(a, b int) bool { return left[idx[a]] < left[idx[b]] })
		for k := 0; k < missing && k < len(idx); k++ {
			portions[idx[len(idx)-1-k]]++
		}
	}
	for s, k := range portions {
		if k <= 0 {
			return work{}, fmt.Errorf("%w: stratified batching: stream %d gets %d samples of each global batch of %d; raise the batch size or its proportion",
				ErrInvalid, s, k, G)
		}
	}
	one := Shape{Nodes: 1, RanksPerNode: shape.RanksPerNode, WorkersPerRank: shape.WorkersPerRank}
	rows := make([][]int64, len(p.streams))
	m := math.MaxInt
	for s := range p.streams {
		a, err := p.streamWork(c, s, one, 1)
		if err != nil {
			return work{}, err
		}
		flat := a.consumption()
		k := portions[s]
		if rem := len(flat) % k; rem != 0 {
			for range k - rem {
				flat = append(flat, -1)
			}
		}
		m = min(m, fullRows(flat, k))
		rows[s] = flat
	}
	flat := make([]int64, 0, m*G)
	for t := 0; t < m; t++ {
		for s, k := range portions {
			flat = append(flat, rows[s][t*k:(t+1)*k]...)
		}
	}
	return dealGlobalBatches(flat, shape, B, c.sampleInEpoch/int64(G)), nil
}

// devicePerStreamWork implements batching_method device_per_stream (spec
// §12.4).
func (p *Planner) devicePerStreamWork(c *epochConfig) (work, error) {
	shape, B := c.shape, c.batchSize
	P, R := shape.Nodes, shape.RanksPerNode
	if c.ncn%P != 0 {
		return work{}, fmt.Errorf("%w: device_per_stream batching needs num_canonical_nodes (%d) divisible by the node count (%d)", ErrInvalid, c.ncn, P)
	}
	k := c.ncn / P
	canon := Shape{Nodes: c.ncn, RanksPerNode: R, WorkersPerRank: shape.WorkersPerRank}
	parts := make([]work, len(p.streams))
	for s := range p.streams {
		a, err := p.streamWork(c, s, canon, 1)
		if err != nil {
			return work{}, err
		}
		parts[s] = a
	}
	// nodeBatches[n][s] holds node n's full device batches from stream s.
	nodeBatches := make([][][]int64, P)
	counts := make([][]int, P)
	maxb := 0
	for n := 0; n < P; n++ {
		nodeBatches[n] = make([][]int64, len(p.streams))
		counts[n] = make([]int, len(p.streams))
		total := 0
		for s, a := range parts {
			sub := a
			sub.shape[0] = k
			per := a.shape[1] * a.shape[2] * a.shape[3] * a.shape[4]
			sub.data = a.data[n*k*per : (n+1)*k*per]
			flat := sub.consumption()
			for range B - len(flat)%B {
				flat = append(flat, -1)
			}
			f := fullRows(flat, B)
			if f == 0 {
				return work{}, fmt.Errorf("%w: device_per_stream batching: stream %d cannot fill one device batch of %d samples on node %d", ErrInvalid, s, B, n)
			}
			counts[n][s] = f
			nodeBatches[n][s] = flat[:f*B]
			total += f
		}
		maxb = max(maxb, total)
	}
	maxb += P*R - maxb%(P*R)
	g := c.batchRNG()
	perNode := make([][]int64, P)
	for n := 0; n < P; n++ {
		order := originsOrder(g, counts[n])
		seq := make([]int64, 0, maxb*B)
		for _, o := range order {
			seq = append(seq, nodeBatches[n][o[0]][o[1]*B:(o[1]+1)*B]...)
		}
		for len(seq) < maxb*B {
			seq = append(seq, -1)
		}
		perNode[n] = seq
	}
	flat := make([]int64, 0, P*maxb*B)
	for b := 0; b < maxb; b++ {
		for n := 0; n < P; n++ {
			flat = append(flat, perNode[n][b*B:(b+1)*B]...)
		}
	}
	G := P * R * B
	return dealGlobalBatches(flat, shape, B, c.sampleInEpoch/int64(G)), nil
}
