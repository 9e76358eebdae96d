package stream_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/sluicedata/sluice/plan"
	"github.com/sluicedata/sluice/stream"
)

// TestCacheMemory reads a remote dataset whole with its shards fetched in
// memory (the default CacheMemory), with none (negative), and with too
// little room for one shard (its files then): every sample arrives once
// with its payload, and a second Dataset over the same cache directory
// finds every shard file in place and whole (written with direct I/O in
// the first case) without downloading it again.
func TestCacheMemory(t *testing.T) {
	for _, mem := range []int64{0, -1, 1} {
		t.Run(fmt.Sprintf("CacheMemory=%d", mem), func(t *testing.T) {
			ctx := context.Background()
			const n = 400
			reg, cb := memDataset(t, spec{samples: n, payload: 3000, sizeLimit: 200 << 10})
			local := t.TempDir()
			for pass := range 2 {
				ds, err := stream.Open(ctx, &stream.Options{Remote: "mem://data", Local: local, Registry: reg, CacheMemory: mem, BatchSize: 8})
				if err != nil {
					t.Fatal(err)
				}
				ep, err := ds.NewEpoch(ctx, plan.World{Nodes: 1, RanksPerNode: 1}, 1)
				if err != nil {
					t.Fatal(err)
				}
				it, err := ep.RankIter(ctx)
				if err != nil {
					t.Fatal(err)
				}
				seen := make([]bool, n)
				for it.Next() {
					s, err := it.Sample()
					if err != nil {
						t.Fatal(err)
					}
					id := sampleID(t, s)
					if id < 0 || id >= n || seen[id] {
						t.Fatalf("pass %d: sample %d out of range or twice", pass, id)
					}
					seen[id] = true
					if !bytes.Equal(s["data"].([]byte), payload(int(id), 3000)) {
						t.Fatalf("pass %d: sample %d: wrong payload", pass, id)
					}
				}
				if err := it.Err(); err != nil {
					t.Fatal(err)
				}
				it.Close()
				if err := ds.Close(); err != nil {
					t.Fatal(err)
				}
				for id, ok := range seen {
					if !ok {
						t.Fatalf("pass %d: sample %d never delivered", pass, id)
					}
				}
			}
			shards := 0
			for k, c := range cb.counts() {
				if k == "index.json" {
					continue
				}
				shards++
				if c != 1 {
					t.Errorf("%s downloaded %d times over two passes, want once", k, c)
				}
			}
			if shards < 4 {
				t.Fatalf("%d shards downloaded, want several", shards)
			}
		})
	}
}
