package sim_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicedata/sluice/plan"
	"github.com/sluicedata/sluice/sim"
)

// TestSlotsPace checks that under a cache limit the simulated downloads
// of a rank iterator do not depend on its pace, nor on its fetch slots:
// the slots bound the downloads a walk admitted, not the walk (stream's
// fetchSlots). When they bounded the walk, TestValidateAgainstS3's
// evicting-2-slots setting simulated 45 requests at a step of 0-60 ms and
// 47 at 80-150 ms (47 at every step with 8 slots), and the real stream
// followed its own pace the same way (46 measured against 45 once in CI).
func TestSlotsPace(t *testing.T) {
	_, idx, data := validationDataset(t)
	seed := int64(7)
	run := func(conc int, step time.Duration) *sim.Report {
		rep, err := sim.Run(context.Background(), &sim.Config{
			Dataset:             sim.DatasetFromIndex(idx, int64(len(data)), false),
			Plan:                plan.Options{BatchSize: 10, Shuffle: true, ShuffleAlgo: plan.AlgoPy1s, ShuffleSeed: &seed},
			Shape:               plan.Shape{Nodes: 1, RanksPerNode: 1, WorkersPerRank: 1},
			RankIterator:        true,
			Store:               sim.Store{Latency: 40 * time.Millisecond, BandwidthPerNode: 1e6},
			StepTime:            sim.Fixed(step),
			PrefetchConcurrency: conc,
			CacheLimit:          420_000,
		})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	want := run(8, 0)
	t.Logf("8 slots, step 0: %d requests, %d bytes", want.StoreRequests, want.StoreBytes)
	for _, conc := range []int{2, 8} {
		for _, step := range []time.Duration{0, 30 * time.Millisecond, 80 * time.Millisecond, 150 * time.Millisecond} {
			if got := run(conc, step); got.StoreRequests != want.StoreRequests || got.StoreBytes != want.StoreBytes {
				t.Errorf("%d slots, step %s: %d requests, %d bytes; want %d, %d (8 slots, step 0)",
					conc, step, got.StoreRequests, got.StoreBytes, want.StoreRequests, want.StoreBytes)
			}
		}
	}
}
