package sim

import "runtime"

// stepper plays one step on every node and returns each node's ready
// time in rs. The nodes share nothing but the step's start t (each has its
// own link, cache and schedule), so their steps run on up to GOMAXPROCS
// goroutines, each over a fixed contiguous group of nodes; the caller
// combines rs in node order, so the results do not depend on the
// scheduling.
type stepper struct {
	nodes []*node
	rs    []float64
	// groups[g] is the [lo, hi) of group g; group 0 runs on the caller.
	groups [][2]int
	starts []chan stepJob
	done   chan struct{}
}

type stepJob struct {
	s int
	t float64
}

// newStepper starts the goroutines of the groups after the first (none
// when the nodes are few, there is one CPU, or a test hook watches the
// nodes, which it may not expect to be called concurrently). close stops
// them.
func newStepper(c *Config, nodes []*node) *stepper {
	st := &stepper{nodes: nodes, rs: make([]float64, len(nodes))}
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
	st.done = make(chan struct{}, g)
	for i := 1; i < g; i++ {
		ch := make(chan stepJob, 1)
		st.starts = append(st.starts, ch)
		go func(lo, hi int) {
			for j := range ch {
				st.run(lo, hi, j)
				st.done <- struct{}{}
			}
		}(st.groups[i][0], st.groups[i][1])
	}
	return st
}

func (st *stepper) run(lo, hi int, j stepJob) {
	for i := lo; i < hi; i++ {
		st.rs[i] = st.nodes[i].step(j.s, j.t)
	}
}

// step plays step s from t on every node.
func (st *stepper) step(s int, t float64) []float64 {
	j := stepJob{s: s, t: t}
	for _, ch := range st.starts {
		ch <- j
	}
	st.run(st.groups[0][0], st.groups[0][1], j)
	for range st.starts {
		<-st.done
	}
	return st.rs
}

// close stops the goroutines.
func (st *stepper) close() {
	for _, ch := range st.starts {
		close(ch)
	}
	st.starts = nil
}
