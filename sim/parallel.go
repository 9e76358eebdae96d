package sim

import (
	"runtime"
	"sync/atomic"
	"time"
)

// stepper plays one step on every node and returns each node's ready
// time in rs. The nodes share nothing but the step's start t (each has its
// own link, cache and schedule), so their steps run on up to GOMAXPROCS
// goroutines, each over a fixed contiguous group of nodes; the caller
// combines rs in node order, so the results do not depend on the
// scheduling.
//
// A step is short (~0.5 ms of a group's work at the seed scale, 15,632 of
// them), so the groups meet at a barrier that spins a while before it
// sleeps: a goroutine that slept on a channel at every step had to be
// woken by the kernel at the next, which on a loaded machine took longer
// than the step and left one core doing the work of two.
type stepper struct {
	nodes []*node
	rs    []float64
	// groups[g] is the [lo, hi) of group g; group 0 runs on the caller.
	groups [][2]int
	job    stepJob
	seq    atomic.Int64 // steps published to the groups
	left   atomic.Int32 // groups after the first still playing the step
	closed atomic.Bool
	// A goroutine that spun for spin sleeps on its channel: the
	// groups' wake (by step) and the caller's done, once it set its flag.
	sleeping []atomic.Bool
	wake     []chan struct{}
	waiting  atomic.Bool
	done     chan struct{}
	spin     time.Duration // spinFor (tests: 0, always sleep)
}

type stepJob struct {
	s int
	t float64
}

// spinFor is how long a goroutine at the barrier spins before it sleeps:
// about the groups' usual difference in a step, and short, since where
// another process holds a core the group it waits for may be the one its
// spinning keeps off it.
const spinFor = 100 * time.Microsecond

// spinning reports whether a wait that began at start and has spun spins
// times may spin on (the clock read every 16 spins).
func (st *stepper) spinning(start time.Time, spins int) bool {
	return st.spin > 0 && (spins%16 != 0 || time.Since(start) < st.spin)
}

// newStepper starts the goroutines of the groups after the first (none
// when the nodes are few, there is one CPU, or a test hook watches the
// nodes, which it may not expect to be called concurrently). close stops
// them.
func newStepper(c *Config, nodes []*node) *stepper { return newStepperSpin(c, nodes, spinFor) }

// newStepperSpin is newStepper whose barrier spins for spin.
func newStepperSpin(c *Config, nodes []*node, spin time.Duration) *stepper {
	st := &stepper{nodes: nodes, rs: make([]float64, len(nodes)), done: make(chan struct{}, 1), spin: spin}
	g := min(runtime.GOMAXPROCS(0), len(nodes)/2)
	if c.stepGroups > 0 {
		g = min(c.stepGroups, len(nodes))
	}
	if c.onEvict != nil || c.onPrefetch != nil || g < 2 {
		g = 1
	}
	for i := range g {
		st.groups = append(st.groups, [2]int{i * len(nodes) / g, (i + 1) * len(nodes) / g})
	}
	st.sleeping = make([]atomic.Bool, g)
	st.wake = make([]chan struct{}, g)
	for i := 1; i < g; i++ {
		st.wake[i] = make(chan struct{}, 1)
		go st.group(i)
	}
	return st
}

// group plays group i's part of every step published until close.
func (st *stepper) group(i int) {
	var seen int64
	for {
		start := time.Now()
		for spins := 1; st.seq.Load() == seen && !st.closed.Load(); spins++ {
			if st.spinning(start, spins) {
				runtime.Gosched()
				continue
			}
			st.sleeping[i].Store(true)
			if st.seq.Load() != seen || st.closed.Load() {
				if !st.sleeping[i].Swap(false) {
					<-st.wake[i] // the waker saw the flag: take its token
				}
				break
			}
			<-st.wake[i]
		}
		if st.closed.Load() {
			return
		}
		seen = st.seq.Load()
		st.run(st.groups[i][0], st.groups[i][1], st.job)
		if st.left.Add(-1) == 0 && st.waiting.Swap(false) {
			st.done <- struct{}{}
		}
	}
}

func (st *stepper) run(lo, hi int, j stepJob) {
	for i := lo; i < hi; i++ {
		st.rs[i] = st.nodes[i].step(j.s, j.t)
	}
}

// wakeGroups wakes the groups that sleep.
func (st *stepper) wakeGroups() {
	for i := 1; i < len(st.groups); i++ {
		if st.sleeping[i].Swap(false) {
			st.wake[i] <- struct{}{}
		}
	}
}

// step plays step s from t on every node.
func (st *stepper) step(s int, t float64) []float64 {
	j := stepJob{s: s, t: t}
	if len(st.groups) > 1 {
		st.job = j
		st.left.Store(int32(len(st.groups) - 1))
		st.seq.Add(1)
		st.wakeGroups()
	}
	st.run(st.groups[0][0], st.groups[0][1], j)
	start := time.Now()
	for spins := 1; st.left.Load() != 0; spins++ {
		if st.spinning(start, spins) {
			runtime.Gosched()
			continue
		}
		st.waiting.Store(true)
		if st.left.Load() == 0 {
			if !st.waiting.Swap(false) {
				<-st.done // the last group saw the flag: take its token
			}
			break
		}
		<-st.done
	}
	return st.rs
}

// close stops the goroutines.
func (st *stepper) close() {
	st.closed.Store(true)
	st.wakeGroups()
}
