package sim

import (
	"context"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/sluicedata/sluice/plan"
)

// TestParallelStepsMatchSerial plays one evicting, stalling run with the
// nodes' steps on one goroutine and on several: the reports must be equal
// to the bit (the groups only split independent nodes; run under -race
// it also checks that they share nothing).
func TestParallelStepsMatchSerial(t *testing.T) {
	sizes := make([]int64, 600)
	for i := range sizes {
		sizes[i] = 40 + int64(i%7)
	}
	cfg := func(groups int) *Config {
		return &Config{
			Dataset:    UniformDataset(sizes, 50_000, 1<<20),
			Plan:       plan.Options{BatchSize: 4, Shuffle: true},
			Shape:      plan.Shape{Nodes: 5, RanksPerNode: 4, WorkersPerRank: 2},
			Store:      Store{Latency: 20 * time.Millisecond, BandwidthPerNode: 200e6, BandwidthTotal: 600e6},
			StepTime:   Normal{200 * time.Millisecond, 30 * time.Millisecond},
			DecodeCost: time.Millisecond,
			CacheLimit: 150 << 20,
			Epochs:     2,
			KeepSteps:  true,
			stepGroups: groups,
		}
	}
	serial, err := Run(context.Background(), cfg(1))
	if err != nil {
		t.Fatal(err)
	}
	var ev int64
	for _, n := range serial.Nodes {
		ev += n.Evictions
	}
	if ev == 0 || serial.StalledSteps == 0 {
		t.Fatalf("the run neither evicts nor stalls (%d evictions, %d stalled steps): not a test", ev, serial.StalledSteps)
	}
	for _, g := range []int{2, 3, 5} {
		got, err := Run(context.Background(), cfg(g))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, serial) {
			t.Errorf("%d step groups: report differs from the serial one:\n%+v\nwant\n%+v", g, got, serial)
		}
	}
}

// The groups' barrier gives every node's step to the serial stepper's
// results whether the goroutines spin or sleep at it (spin 0: every wait
// sleeps on its channel), and close ends the goroutines, sleeping or not.
func TestStepperBarrier(t *testing.T) {
	sizes := make([]int64, 300)
	for i := range sizes {
		sizes[i] = 20 + int64(i%5)
	}
	c := &Config{
		Dataset:    UniformDataset(sizes, 50_000, 1<<20),
		Plan:       plan.Options{BatchSize: 4, Shuffle: true},
		Shape:      plan.Shape{Nodes: 6, RanksPerNode: 2, WorkersPerRank: 2},
		Store:      Store{Latency: 20 * time.Millisecond, BandwidthPerNode: 200e6},
		CacheLimit: 100 << 20,
	}
	play := func(groups int, spin time.Duration) [][]float64 {
		cc := *c
		cc.stepGroups = groups
		p, err := plan.New([]plan.Stream{{ShardSizes: sizes}}, &cc.Plan)
		if err != nil {
			t.Fatal(err)
		}
		spec, err := p.NewTracker().Begin(cc.Shape)
		if err != nil {
			t.Fatal(err)
		}
		ep, err := p.Epoch(spec)
		if err != nil {
			t.Fatal(err)
		}
		nodes := make([]*node, cc.Shape.Nodes)
		for i := range nodes {
			nodes[i] = newNode(&cc, i)
		}
		if err := schedules(ep, &cc, nodes); err != nil {
			t.Fatal(err)
		}
		st := newStepperSpin(&cc, nodes, spin)
		if len(st.groups) != groups {
			t.Fatalf("%d groups, want %d", len(st.groups), groups)
		}
		var out [][]float64
		for s := range nodes[0].sc.Steps() {
			out = append(out, append([]float64(nil), st.step(s, float64(s)*0.05)...))
			if s%50 == 0 {
				time.Sleep(time.Millisecond) // the groups wait long
			}
		}
		st.close()
		return out
	}
	before := runtime.NumGoroutine()
	want := play(1, spinFor)
	for _, g := range []int{2, 3} {
		for _, spin := range []time.Duration{0, spinFor} {
			if got := play(g, spin); !reflect.DeepEqual(got, want) {
				t.Errorf("%d groups, spin %d: the steps' ready times differ from the serial stepper's", g, spin)
			}
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines after close, %d before", n, before)
	}
}
