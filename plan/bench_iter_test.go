package plan_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluicedata/sluice/internal/cputime"
	"github.com/sluicedata/sluice/plan"
)

// BenchmarkResumeFirst measures the time to the first batch after resuming
// at 10%, 50% and 90% of a 1M- and a 10M-sample epoch with WorkerIter
// (MosaicML defaults: one node, NCN 1 for py1e/py1br/naive and 64 for py1s,
// block size 4M; 8 ranks × 8 workers), from nothing: Epoch (the shuffle's
// preparation), the worker's positions, and one mapped batch. Besides the
// means it reports each op's wall and CPU time at the minimum and the
// median (opTimes), the figures a latency target is read from on a
// shared machine.
func BenchmarkResumeFirst(b *testing.B) {
	for _, n := range []int64{1_000_000, 10_000_000} {
		for _, algo := range []string{"none", plan.AlgoPy1e, plan.AlgoPy1s, plan.AlgoPy1br, plan.AlgoNaive} {
			for _, at := range []int64{10, 50, 90} {
				if at != 90 && n != 10_000_000 {
					continue
				}
				b.Run(fmt.Sprintf("%s/n=%d/at=%d%%", algo, n, at), func(b *testing.B) {
					o := &plan.Options{Shuffle: algo != "none", BatchSize: 32}
					if o.Shuffle {
						o.ShuffleAlgo = algo
					}
					streams := benchStreams(n)
					shape := plan.Shape{Nodes: 1, RanksPerNode: 8, WorkersPerRank: 8}
					b.ReportAllocs()
					var ops opTimes
					cpu := cputime.Process()
					for b.Loop() {
						op := ops.start()
						// A Planner of its own each time: its Epochs share
						// their shuffle's preparation.
						p, err := plan.New(streams, o)
						if err != nil {
							b.Fatal(err)
						}
						ep, err := p.Epoch(plan.EpochSpec{SampleInEpoch: n * at / 100, Shape: shape})
						if err != nil {
							b.Fatal(err)
						}
						it, err := ep.WorkerIter(0, 3, 0)
						if err != nil {
							b.Fatal(err)
						}
						if seg, err := it.Next(); err != nil || len(seg) == 0 {
							b.Fatal(err, len(seg))
						}
						ops.stop(op)
					}
					reportCPU(b, cpu)
					ops.report(b)
				})
			}
		}
	}
}

// BenchmarkResumeNode measures what a node's agent does when a job
// resumes at 90% of a 10M-sample epoch: every one of 8 ranks × 8 workers
// plans the epoch (one Planner, as the agent holds one per dataset) and
// maps its first batch. The Epochs share the shuffle's preparation.
func BenchmarkResumeNode(b *testing.B) {
	const n = 10_000_000
	streams := benchStreams(n)
	shape := plan.Shape{Nodes: 1, RanksPerNode: 8, WorkersPerRank: 8}
	o := &plan.Options{Shuffle: true, ShuffleAlgo: plan.AlgoPy1e, BatchSize: 32}
	b.ReportAllocs()
	var ops opTimes
	cpu := cputime.Process()
	for b.Loop() {
		op := ops.start()
		p, err := plan.New(streams, o)
		if err != nil {
			b.Fatal(err)
		}
		for r := range 8 {
			for w := range 8 {
				ep, err := p.Epoch(plan.EpochSpec{SampleInEpoch: n * 9 / 10, Shape: shape})
				if err != nil {
					b.Fatal(err)
				}
				it, err := ep.WorkerIter(0, r, w)
				if err != nil {
					b.Fatal(err)
				}
				if seg, err := it.Next(); err != nil || len(seg) == 0 {
					b.Fatal(err, len(seg))
				}
			}
		}
		ops.stop(op)
	}
	reportCPU(b, cpu)
	ops.report(b)
}

// opTimes records the wall and process CPU time of each op of a
// benchmark (the CPU of every goroutine the op starts too).
type opTimes struct {
	wall, cpu []time.Duration
}

type opStart struct {
	wall time.Time
	cpu  time.Duration
}

func (t *opTimes) start() opStart { return opStart{time.Now(), cputime.Process()} }

func (t *opTimes) stop(s opStart) {
	t.wall = append(t.wall, time.Since(s.wall))
	t.cpu = append(t.cpu, cputime.Process()-s.cpu)
}

// report adds the minimum and median wall and CPU milliseconds of an op.
func (t *opTimes) report(b *testing.B) {
	for _, m := range []struct {
		name string
		v    []time.Duration
	}{{"wall", t.wall}, {"cpu", t.cpu}} {
		if len(m.v) == 0 {
			continue
		}
		slices.Sort(m.v)
		b.ReportMetric(float64(m.v[0])/1e6, m.name+"-min-ms")
		b.ReportMetric(float64(m.v[len(m.v)/2])/1e6, m.name+"-med-ms")
	}
}
