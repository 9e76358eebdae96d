package cli

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicedata/sluice/internal/stores"
	"github.com/sluicedata/sluice/plan"
	"github.com/sluicedata/sluice/stream"
)

// TestSimulateStreams simulates a mixed dataset (two streams with
// MosaicML's proportions, the second repeated) and streams it for real
// from an HTTP server with the same settings: the epoch's samples and the
// requests the server saw equal the simulation's.
func TestSimulateStreams(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	writeStreamDataset(t, a, 300, "")
	writeStreamDataset(t, b, 120, "")
	ua, na := countingFileServer(t, a)
	ub, nb := countingFileServer(t, b)
	for _, tc := range []struct {
		name   string
		flags  []string
		weight func(s []stream.Stream)
		limit  int64
	}{
		{"proportions", []string{"--stream", ua + ",proportion=0.75", "--stream", ub + ",proportion=0.25"},
			func(s []stream.Stream) { p, q := 0.75, 0.25; s[0].Proportion, s[1].Proportion = &p, &q }, 0},
		{"repeat-choose", []string{"--stream", ua + ",choose=200", "--stream", ub + ",repeat=2"},
			func(s []stream.Stream) { n, r := int64(200), 2.0; s[0].Choose, s[1].Repeat = &n, &r }, 0},
		// A cache of a few shards: shards are evicted and fetched again,
		// the same ones in both.
		{"evicting", []string{"--stream", ua + ",proportion=0.75", "--stream", ub + ",proportion=0.25", "--cache-limit", "16000"},
			func(s []stream.Stream) { p, q := 0.75, 0.25; s[0].Proportion, s[1].Proportion = &p, &q }, 16000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"simulate", "--batch-size", "10", "--rank-iterator", "--shuffle", "--json"}, tc.flags...)
			out, err := runCLI(t, args...)
			if err != nil {
				t.Fatalf("simulate: %v\n%s", err, out)
			}
			var sim struct {
				Report struct {
					Samples       int64 `json:"samples"`
					StoreRequests int64 `json:"store_requests"`
				} `json:"report"`
			}
			if err := json.Unmarshal([]byte(out), &sim); err != nil {
				t.Fatalf("simulate --json: %v\n%s", err, out)
			}
			before := na() + nb()
			streams := []stream.Stream{{Remote: ua}, {Remote: ub}}
			tc.weight(streams)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			ds, err := stream.Open(ctx, &stream.Options{Streams: streams, Local: filepath.Join(t.TempDir(), "cache"),
				BatchSize: 10, Shuffle: true, Registry: stores.Default(), CacheLimit: tc.limit})
			if err != nil {
				t.Fatal(err)
			}
			defer ds.Close()
			ep, err := ds.NewEpoch(ctx, plan.World{Nodes: 1, RanksPerNode: 1}, 1)
			if err != nil {
				t.Fatal(err)
			}
			it, err := ep.RankIter(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var n int64
			for it.Next() {
				n++
			}
			if err := it.Err(); err != nil {
				t.Fatal(err)
			}
			it.Close()
			got := int64(na() + nb() - before)
			t.Logf("streamed %d samples in %d requests, simulated %d in %d", n, got, sim.Report.Samples, sim.Report.StoreRequests)
			if n != sim.Report.Samples || got != sim.Report.StoreRequests {
				t.Errorf("streamed %d samples in %d requests, simulated %d in %d", n, got, sim.Report.Samples, sim.Report.StoreRequests)
			}
		})
	}
}
