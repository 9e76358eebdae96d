package sim

import (
	"context"
	"reflect"
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
