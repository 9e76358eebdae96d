package sim

// readByHeap is readUntil's loop where the workers do not take turns: the
// same reads in the same order, the next chain taken from a binary heap
// of the unfinished chains by (time, index in chains) instead of a scan of
// them all per read. The scan chose the earliest unfinished chain, the
// first in chains at one time: the heap's minimum. Only a read changes a
// chain's time or ends it, and only the chain read, so the heap is built
// once per call (chains are added and dropped between calls, by step).
func (nd *node) readByHeap(until float64, step int) {
	h := nd.readHeap[:0]
	pending := 0 // step's unfinished chains (step ≥ 0)
	for i := range nd.chains {
		c := &nd.chains[i]
		if c.done {
			continue
		}
		if c.step == step {
			pending++
		}
		h = append(h, int32(i))
	}
	nd.readHeap = h
	for i := len(h)/2 - 1; i >= 0; i-- {
		nd.readDown(i)
	}
	for len(nd.readHeap) > 0 && (step < 0 || pending > 0) {
		best := &nd.chains[nd.readHeap[0]]
		if best.t >= until {
			return
		}
		nd.read(best)
		if best.done {
			if best.step == step {
				pending--
			}
			last := len(nd.readHeap) - 1
			nd.readHeap[0] = nd.readHeap[last]
			nd.readHeap = nd.readHeap[:last]
		}
		nd.readDown(0)
	}
}

// readLess orders heap entries i and j by their chains' time, then index.
func (nd *node) readLess(i, j int) bool {
	a, b := nd.readHeap[i], nd.readHeap[j]
	ta, tb := nd.chains[a].t, nd.chains[b].t
	if ta != tb {
		return ta < tb
	}
	return a < b
}

// readDown restores the heap below entry i.
func (nd *node) readDown(i int) {
	h := nd.readHeap
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && nd.readLess(r, l) {
			m = r
		}
		if !nd.readLess(m, i) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}
