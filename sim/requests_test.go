package sim

import (
	"context"
	"testing"
	"time"

	"github.com/sluicedata/sluice/cache"
	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/plan"
)

// TestRangedShardRequests: a shard large enough for the cache to fetch as
// parallel ranges is counted as the requests the cache makes for it
// (cache.Requests: a GET per range and the Stat its checksum comes from;
// cache's TestRangedShardChecked measures them against the real S3
// server), not as one. MosaicML's default shard size (64 MiB) is such a
// shard; before, the simulation counted 1 request where the store saw 9.
func TestRangedShardRequests(t *testing.T) {
	const big, small = 64 << 20, 1 << 20
	idx := &format.Index{Shards: []format.ShardInfo{
		{Samples: 4, RawData: format.FileInfo{Bytes: big}},
		{Samples: 4, RawData: format.FileInfo{Bytes: small}},
		{Samples: 4, RawData: format.FileInfo{Bytes: small}, ZipData: &format.FileInfo{Bytes: big}},
	}}
	d := DatasetFromIndex(idx, 100, false)
	for i, want := range []int{cache.Requests(big), 1, cache.Requests(big)} {
		if got := d.Shards[i].Requests; got != want {
			t.Errorf("shard %d: %d requests, want %d", i, got, want)
		}
	}
	if cache.Requests(big) != 9 || cache.Requests(small) != 1 {
		t.Fatalf("cache.Requests: %d for 64 MiB (want 8 ranges and a Stat), %d for 1 MiB", cache.Requests(big), cache.Requests(small))
	}
	c := &Config{
		Dataset:       d,
		Plan:          plan.Options{BatchSize: 4},
		Shape:         plan.Shape{Nodes: 1, RanksPerNode: 1, WorkersPerRank: 1},
		RankIterator:  true,
		Store:         Store{Latency: time.Millisecond, BandwidthPerNode: 1 << 30},
		StepTime:      Fixed(time.Millisecond),
		IndexRequests: 1,
	}
	r, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(1 + 9 + 1 + 9); r.StoreRequests != want {
		t.Errorf("simulated %d store requests, want %d", r.StoreRequests, want)
	}
}
