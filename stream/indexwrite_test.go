package stream_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicedata/sluice/internal/stores"
	"github.com/sluicedata/sluice/plan"
	"github.com/sluicedata/sluice/stream"
)

// TestIndexWriteFailureFailsTheEpoch: the downloaded index.json is written
// into the cache behind the first downloads, so Open does not see that
// write fail (here its temporary file's name is taken by a directory).
// Whatever the timing, reading the epoch must then end with an error
// naming index.json — either at a shard's commit or, when every shard was
// read early from its temporary file, at the end — and never end cleanly
// with nothing cached.
func TestIndexWriteFailureFailsTheEpoch(t *testing.T) {
	src := t.TempDir()
	writeDataset(t, src, spec{samples: 300, payload: 100, sizeLimit: 1500})
	for trial := range 8 {
		local := t.TempDir()
		if err := os.Mkdir(filepath.Join(local, "index.json.part"), 0o755); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		ds, err := stream.Open(ctx, &stream.Options{Remote: "file://" + src, Local: local, Registry: stores.Default(),
			Retry: fastRetry(), BatchSize: 4})
		if err != nil {
			cancel()
			if !strings.Contains(err.Error(), "index.json") {
				t.Fatalf("trial %d: open failed without naming index.json: %v", trial, err)
			}
			continue
		}
		ep, err := ds.NewEpoch(ctx, plan.World{Nodes: 1, RanksPerNode: 1}, 1)
		if err != nil {
			t.Fatal(err)
		}
		it, err := ep.RankIter(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for it.Next() {
			n++
		}
		err = it.Err()
		it.Close()
		ds.Close()
		cancel()
		if err == nil {
			t.Fatalf("trial %d: the epoch ended cleanly after %d samples although the index could not be cached", trial, n)
		}
		if !strings.Contains(err.Error(), "index.json") {
			t.Fatalf("trial %d: error does not name index.json: %v", trial, err)
		}
	}
}
