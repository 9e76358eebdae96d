package sim

import "math"

// step plays step s beginning at t (the previous step's end): the
// consumers move to the step's first sample and each rank's consumer reads
// its part of the step in order, as an Iterator does: it opens a shard
// when it reaches it, after the previous shard of its part was there
// (demand-fetching it then if absent), while the prefetchers run on every
// completion. The first sample out lifts the first-sample budget. The
// step's batches are then decoded. It returns when the node's batch for
// step s is ready.
func (nd *node) step(s int, t float64) float64 {
	nd.advance(t)
	lo, hi := nd.sc.StepStart(s), nd.sc.StepStart(s+1)
	nd.release()
	for nd.stepRun < len(nd.runs) && nd.runs[nd.stepRun].Start+nd.runs[nd.stepRun].Len <= lo {
		nd.stepRun++
	}
	nd.progress(s, lo, t)

	nd.chains = nd.chains[:0]
	for r := range nd.c.Shape.RanksPerNode {
		from, to := nd.part(s, r)
		if from >= hi {
			break
		}
		i := nd.stepRun
		for i < len(nd.runs) && nd.runs[i].Start+nd.runs[i].Len <= from {
			i++
		}
		nd.chains = append(nd.chains, chain{run: i, from: from, to: to, t: t, first: r == 0,
			origin: r*nd.perRank + s%nd.perRank})
	}
	for {
		c := nd.nextChain()
		if c == nil {
			break
		}
		nd.advance(c.t)
		run := nd.runs[c.run]
		sh := run.Shard
		// A run straddling two ranks' parts is counted once.
		if count := run.Start >= c.from || c.first; count {
			switch nd.state[sh] {
			case present:
				if nd.doneAt[sh] <= c.t {
					nd.hits++
				} else {
					nd.misses++
				}
			case inFlight:
				nd.misses++
			case absent:
				nd.misses++
			}
		}
		if nd.state[sh] == absent {
			nd.demandFetch(sh, c.t, c.origin)
			nd.flush()
		}
		c.t = math.Max(c.t, nd.doneAt[sh])
		nd.clock++
		nd.lastUse[sh] = nd.clock
		// The consumer holds a lease on the shard it reads; the last
		// shard of the step stays leased into the next.
		if run.Start+run.Len >= hi {
			nd.leased[sh]++
			nd.cur = append(nd.cur, sh)
			nd.vic.remove(sh)
		} else if nd.vic.has(sh) {
			nd.vic.set(sh, nd.candidate(sh))
		}
		c.run++
		if c.run >= len(nd.runs) || nd.runs[c.run].Start >= c.to {
			c.done = true
		}
	}
	ready := t
	for _, c := range nd.chains {
		ready = math.Max(ready, c.t)
	}
	nd.advance(ready)
	// DataLoader worker s%W decodes the batch once its shards are there.
	w := s % len(nd.workerFree)
	dec := nd.c.DecodeCost.Seconds() * float64(hi-lo) / float64(nd.c.Shape.RanksPerNode)
	done := math.Max(ready, nd.workerFree[w]) + dec
	nd.workerFree[w] = done
	return done
}

// chain is one rank's consumer within a step: the run it reads next, its
// part [from, to) of the step, and the time it gets there.
type chain struct {
	run      int
	from, to int64
	t        float64
	first    bool // the step's first part
	origin   int  // the consumer reading it
	done     bool
}

// nextChain returns the unfinished chain that is earliest, nil if none.
func (nd *node) nextChain() *chain {
	var best *chain
	for i := range nd.chains {
		c := &nd.chains[i]
		if !c.done && (best == nil || c.t < best.t) {
			best = c
		}
	}
	return best
}
