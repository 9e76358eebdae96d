package shuffle

import (
	"math"
	"runtime"
	"sync/atomic"

	"github.com/sluicedata/sluice/nprand"
)

// A node's preparation (prepareNode) skips every span shuffle of the node
// before any shift is drawn, and a short request's count (countKeep) then
// draws the shifts of the ~3M inputs around it: at 90% of a 10M-sample
// epoch, a 6 ms skip and a 2 ms count, one after the other. The count's
// lines depend on how many draws the skip took, but its draws do not:
// they are the epoch stream's draws a little past the skip's expected
// end. So while one core skips, another makes those draws (an
// nprand.Ahead run: 2 bytes a draw), and the count compares them with its
// lines instead of making them (BenchmarkAhead: 4,096 draws in 1.0-1.4 µs
// against 4.4-7.5 µs, loaded).
//
// The run covers the draws of every input whose shift can reach the
// request's count window, from the skip's expected length minus a margin
// of many deviations; the spans whose draws it does not hold (not yet
// made, or a skip far from its expectation) are counted as before. It is
// made only where a second core can make it (GOMAXPROCS >= 2) and only
// for the request that prepares the node.

// aheadRun is the run of draws made ahead for node c, once the goroutine
// making it has placed it (run): pos[k] is the index in it of span
// first+k's uniform checkpoint (uniCk) draw when known[k] (negative:
// before the run's start).
type aheadRun struct {
	c     int
	first int
	run   atomic.Pointer[nprand.Ahead]
	pos   []int64
	known []bool
	used  atomic.Int64 // spans counted on the run's draws
	done  atomic.Bool  // the count is over: the run is no longer made
}

// stop ends the making of r's draws (after the chunk being made).
func (r *aheadRun) stop() {
	r.done.Store(true)
	if a := r.run.Load(); a != nil {
		a.Stop()
	}
}

// aheadMax bounds a run's draws (2 bytes each): 16 MiB.
const aheadMax = 1 << 23

// startAhead starts making, on another goroutine, the draws the count of
// node-relative ranks [rel, rel+n) of node c will make, for a node whose
// preparation starts from g (nil where no second core can make them).
// Placing the run (the skip's expected length: a few microseconds) is
// done here; allocating it and making its draws on that goroutine.
// Nothing waits for it: the count makes the draws the run does not hold
// yet.
func (e *py1e) startAhead(c int, g nprand.Generator, rel, n int64) *aheadRun {
	if runtime.GOMAXPROCS(0) < 2 && !e.aheadSync {
		return nil
	}
	l := e.l
	first, last := l.nodeSpan[c], l.nodeSpan[c+1]
	a := e.placeAhead(c, g, rel, n)
	if a == nil {
		return nil
	}
	run := &aheadRun{c: c, first: first, pos: make([]int64, last-first), known: make([]bool, last-first)}
	run.run.Store(a)
	if e.aheadHook != nil {
		e.aheadHook(run)
	}
	if e.aheadSync {
		a.Fill()
	} else {
		go a.Fill()
	}
	return run
}

// placeAhead returns the run of draws for startAhead, not yet made, or
// nil when it would not pay.
func (e *py1e) placeAhead(c int, g nprand.Generator, rel, n int64) *nprand.Ahead {
	l := e.l
	first, last := l.nodeSpan[c], l.nodeSpan[c+1]
	ns := l.spanPos[first]
	m := l.spanPos[last] - ns
	// The skip's expected draws and their deviation.
	var mean, vari float64
	var lastZ int64 = -1
	var mz [2]float64
	for i := first; i < last; i++ {
		if z := l.spans[i].size(); z != lastZ {
			lastZ, mz = z, skipMoments(z)
		}
		mean += mz[0]
		vari += mz[1]
	}
	// The inputs whose shifts the count may draw: its window (the
	// request widened by sparseWiden and the slack) plus the largest
	// shift either side.
	mmB := (e.hi-2)/2 + 2
	reach := mmB + sparseWiden + 6*int64(math.Sqrt(float64(mmB)/3)) + 128
	jlo, jhi := max(rel-reach, 0), min(rel+n+reach, m)
	if jhi <= jlo {
		return nil
	}
	// Input j's draw lies about mean + j + (its span's rank)/2 draws on:
	// each span's window draw takes half a draw on average (a 32-bit
	// half). The margin covers 12 deviations of the skip and a draw per
	// span.
	slack := 12*math.Sqrt(vari) + float64(last-first) + 1024
	from := int64(mean-slack) + jlo
	to := int64(mean+slack) + jhi + int64(last-first)
	if from < 0 || to-from > aheadMax {
		return nil
	}
	h := g
	h.Advance(uint64(from))
	return nprand.NewAhead(h, int(to-from))
}

// skipMoments returns the mean and variance of the number of 64-bit
// draws a shuffle of z elements takes (numpy's masked rejection on 32-bit
// halves: step i draws until a value within mask(i) is <= i, a geometric
// number of tries with p = (i+1)/(mask+1); two tries a draw), a band of
// one mask at a time in closed form (harmonic sums): O(log z), so that
// datasets whose shards all differ in size place their runs cheaply.
func skipMoments(z int64) [2]float64 {
	var mean, vari float64
	for b := 1; b < 64 && int64(1)<<(b-1) < z; b++ {
		lo, hi := int64(1)<<(b-1), min(int64(1)<<b-1, z-1) // steps i of mask 2^b - 1
		m := float64(int64(1) << b)
		// Σ m/(i+1) and Σ m²/(i+1)² over i in [lo, hi].
		h1 := harmonic(hi+1, 1) - harmonic(lo, 1)
		h2 := harmonic(hi+1, 2) - harmonic(lo, 2)
		mean += m * h1
		vari += m*m*h2 - m*h1
	}
	return [2]float64{mean / 2, vari / 4}
}

// harmonic returns Σ 1/k^s for k in [1, n] (s 1 or 2): exactly for small
// n, else by its asymptotic expansion (error far below 1e-12).
func harmonic(n int64, s int) float64 {
	if n < 64 {
		var h float64
		for k := n; k >= 1; k-- {
			h += math.Pow(float64(k), -float64(s))
		}
		return h
	}
	x := float64(n)
	if s == 1 {
		const euler = 0.57721566490153286060651209
		return math.Log(x) + euler + 1/(2*x) - 1/(12*x*x) + 1/(120*x*x*x*x)
	}
	return math.Pi*math.Pi/6 - 1/x + 1/(2*x*x) - 1/(6*x*x*x) + 1/(30*x*x*x*x*x)
}

// aheadFor returns the run of draws made ahead for node c, if any.
func (e *py1e) aheadFor(c int) *aheadRun {
	if r := e.ahead.Load(); r != nil && r.c == c {
		return r
	}
	return nil
}

// dropAhead lets node c's run go (its first count is over).
func (e *py1e) dropAhead(c int) {
	if r := e.ahead.Load(); r != nil && r.c == c {
		r.stop()
		e.ahead.CompareAndSwap(r, nil)
	}
}
