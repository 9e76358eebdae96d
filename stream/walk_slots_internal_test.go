package stream

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/sluicedata/sluice/plan"
	"github.com/sluicedata/sluice/storage"
)

// paceRun reads one rank's epoch with a rank iterator under a cache limit
// and 2 fetch slots, sleeping step after every batch of 10 samples, and
// returns the GETs per object (each answered after 20 ms).
func paceRun(t *testing.T, mb storage.Bucket, step time.Duration) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ds, gc := openCounted(ctx, t, mb, 420_000, false)
	defer ds.Close()
	ep, err := ds.NewEpoch(ctx, plan.World{Nodes: 1, RanksPerNode: 1}, 1)
	if err != nil {
		t.Fatal(err)
	}
	it, err := ep.RankIter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var n int64
	for it.Next() {
		if n++; n%10 == 0 {
			time.Sleep(step)
		}
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	if n < 240 {
		t.Fatalf("read %d samples, want the dataset's 240 at least", n)
	}
	return maps.Clone(gc.gets)
}

// TestPrefetchSlotsPace checks that under a cache limit what a rank
// iterator downloads does not depend on its pace against the store's: at
// a step of 0 the consumer waits for every download, at 100 ms every
// download has ended long before it moves. When the fetch slots bounded
// the walk, how many downloads were still running where the consumer
// moved set what its walk admitted, and a walk on a download's goroutine
// saw the consumer wherever it was by then: this setting (the validation's
// evicting-2-slots row: 13 shards of ~77 KB, a 420 KB limit, 2 slots)
// downloaded 45 shards at a fast pace and 47 at a slow one (the
// validation measured 46 against 45 once under load). Now the walk admits
// where the consumer moves, bounded by its budget and window, and the
// slots bound the downloads (fetchSlots).
func TestPrefetchSlotsPace(t *testing.T) {
	mb := lazyPlanStore(t, 240, 4000, 80_000)
	want := paceRun(t, mb, 0)
	t.Logf("step 0: %d GETs", sumGets(want))
	for _, step := range []time.Duration{30 * time.Millisecond, 100 * time.Millisecond} {
		if got := paceRun(t, mb, step); !maps.Equal(got, want) {
			t.Errorf("step %s: %d GETs %v, want %d %v (step 0)", step, sumGets(got), got, sumGets(want), want)
		}
	}
}

func sumGets(m map[string]int) int {
	n := 0
	for _, k := range m {
		n += k
	}
	return n
}
