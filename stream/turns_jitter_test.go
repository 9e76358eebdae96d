package stream_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/sluicedata/sluice/plan"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/stream"
)

// jitterBucket delays each shard GET by 0-3 ms, drawn from the key and a
// seed, so that which of several downloads in flight ends first differs
// between seeds; it counts the GETs per key.
type jitterBucket struct {
	storage.Bucket
	seed uint32
	mu   sync.Mutex
	gets map[string]int
}

func (b *jitterBucket) NewRangeReader(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if off == 0 {
		b.mu.Lock()
		b.gets[key]++
		k := b.gets[key]
		b.mu.Unlock()
		h := fnv.New32a()
		fmt.Fprintf(h, "%d/%s/%d", b.seed, key, k)
		select {
		case <-time.After(time.Duration(h.Sum32()%4) * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return b.Bucket.NewRangeReader(ctx, key, off, n)
}

// TestOrderAdmissionsDownloadOrder checks that with the workers' shard
// changes ordered, what an evicting epoch downloads does not depend on
// the order in which concurrent downloads end (each run delays the GETs
// differently). The eviction's ties of class and distance are broken by
// the last use, which a turn stamps (cache.Dataset.Touch): stamped at the
// lease, when a download ends, the counts differed between these runs.
func TestOrderAdmissionsDownloadOrder(t *testing.T) {
	_, cb := memDataset(t, spec{samples: 600, payload: 300, sizeLimit: 4 << 10})
	var first map[string]int
	for run := range 5 {
		jb := &jitterBucket{Bucket: cb, seed: uint32(run), gets: map[string]int{}}
		r := &storage.Registry{}
		r.Register("mem", func(context.Context, *url.URL) (storage.Bucket, error) { return jb, nil })
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		seed := int64(3)
		ds, err := stream.Open(ctx, &stream.Options{Remote: "mem://data", Local: t.TempDir(), Registry: r,
			BatchSize: 4, Shuffle: true, ShuffleAlgo: plan.AlgoPy1s, ShuffleSeed: &seed, CacheLimit: 44_000,
			PrefetchConcurrency: 2, OrderAdmissions: true})
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		ep, err := ds.NewEpoch(ctx, plan.World{Nodes: 1, RanksPerNode: 1}, 3)
		if err != nil {
			t.Fatal(err)
		}
		want := 0
		for w := range 3 {
			ids, err := ep.Plan().Worker(0, 0, w)
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range ids {
				if id >= 0 {
					want++
				}
			}
		}
		var wg sync.WaitGroup
		var n sync.Map
		for w := range 3 {
			it, err := ep.Iter(ctx, w)
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer it.Close()
				var k int
				for it.Next() {
					k++
				}
				if err := it.Err(); err != nil {
					t.Error(err)
				}
				n.Store(w, k)
			}()
		}
		wg.Wait()
		ds.Close()
		cancel()
		total := 0
		n.Range(func(_, v any) bool { total += v.(int); return true })
		if total != want {
			t.Fatalf("run %d: %d samples delivered, want %d", run, total, want)
		}
		gets := maps.Clone(jb.gets)
		if run == 0 {
			first = gets
			continue
		}
		if !maps.Equal(gets, first) {
			t.Errorf("run %d fetched %v, run 0 %v", run, gets, first)
		}
	}
}
