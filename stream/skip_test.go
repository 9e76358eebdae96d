package stream_test

import (
	"context"
	"testing"

	"github.com/sluicedata/sluice/cache"
	"github.com/sluicedata/sluice/plan"
	"github.com/sluicedata/sluice/stream"
)

// TestSkipFetchesNothing: Skip passes over samples without downloading
// their shards, and Next then continues with exactly the samples after
// them (a resumed consumer that had the skipped ones already).
func TestSkipFetchesNothing(t *testing.T) {
	ctx := context.Background()
	sp := spec{samples: 300, payload: 100, sizeLimit: 2 << 10}
	reg, cb := memDataset(t, sp)
	c, err := cache.Open(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ds, err := stream.Open(ctx, &stream.Options{Remote: "mem://data", Registry: reg, Cache: c, BatchSize: 4, Predownload: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	ep, err := ds.NewEpoch(ctx, plan.World{Nodes: 1, RanksPerNode: 1}, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := planned(t, ep, 0, 0, 0)
	it, err := ep.Iter(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	const skip = 250
	if n := it.Skip(skip); n != skip {
		t.Fatalf("Skip(%d) = %d", skip, n)
	}
	var got []int64
	for it.Next() {
		got = append(got, it.ID())
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want)-skip {
		t.Fatalf("after Skip got %d samples, want %d", len(got), len(want)-skip)
	}
	for i, id := range got {
		if id != want[skip+i] {
			t.Fatalf("sample %d after Skip: %d, want %d", i, id, want[skip+i])
		}
	}
	// Only shards holding samples after the skip (and, at most, the two
	// shards the prefetcher may have started before Skip reached it: the
	// first one, and the next under Predownload 1) were downloaded; the
	// skipped part spans about 16 shards.
	need := map[int]bool{}
	for _, id := range got {
		shard, _, err := ds.Planner().Locate(id)
		if err != nil {
			t.Fatal(err)
		}
		need[shard] = true
	}
	shards := 0
	for key, n := range cb.counts() {
		if key != "index.json" && n > 0 {
			shards++
		}
	}
	if shards > len(need)+2 {
		t.Fatalf("%d shards downloaded, want at most %d (the skipped ones were fetched)", shards, len(need)+2)
	}
	if it.Skip(10) != 0 {
		t.Fatal("Skip at the end passed over samples")
	}
}
