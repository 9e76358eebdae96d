package sim_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/internal/cputime"
	"github.com/sluicedata/sluice/plan"
	"github.com/sluicedata/sluice/sim"
)

// BenchmarkTurnsCostS3 measures what taking turns (OrderAdmissions)
// costs a rank's DataLoader workers under a cache limit at realistic shard
// sizes: 24 MDS shards of 2 MB (2,000 samples of ~1 KB) on the real S3
// server behind the shaping proxy (20 ms, 50 MB/s), py1e, batch 32, the
// default predownload and prefetch concurrency, read by 2, 4 or 8 workers
// as torch's DataLoader asks them (workersShaped) with no step time (the
// loop as fast as the input), under limits where every shard is fetched
// once and where some are fetched again. Each round reads the epoch
// without and with turns, alternated, into a fresh cache; it reports the
// mean wall time of each, the wall and CPU ratios, and logs the requests
// measured and simulated (SLUICE_TURNS_ROUNDS rounds, default 3; the
// figures are in docs/input-bound.md). Run under .ci/with-services.sh.
func BenchmarkTurnsCostS3(b *testing.B) {
	rounds := 3
	if v, err := strconv.Atoi(os.Getenv("SLUICE_TURNS_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	src := b.TempDir()
	writeMDS(b, src, 48_000, 1000, 2<<20)
	data, err := os.ReadFile(filepath.Join(src, format.IndexFile))
	if err != nil {
		b.Fatal(err)
	}
	idx, err := format.ParseIndex(data)
	if err != nil {
		b.Fatal(err)
	}
	ds := sim.DatasetFromIndex(idx, int64(len(data)), false)
	var total int64
	for _, sh := range ds.Shards {
		total += sh.CachedBytes
	}
	seed := int64(11)
	base := sim.Config{
		Dataset: ds, Plan: plan.Options{BatchSize: 32, Shuffle: true, ShuffleSeed: &seed},
		Store: sim.Store{Latency: 20 * time.Millisecond, BandwidthPerNode: 50e6},
	}
	store := uploadShaped(b, src, &base)
	for _, tc := range []struct {
		workers int
		part    float64 // the cache limit is this part of the dataset's bytes
		block   int64   // py1e's shuffle block in samples
	}{
		// The working set fits: every shard is fetched once (simulated
		// with and without turns).
		{2, 0.33, 8000}, {4, 0.33, 8000}, {8, 0.5, 8000},
		// It does not quite: some shards are fetched again (29-74
		// requests simulated).
		{2, 0.35, 14000}, {4, 0.35, 14000}, {2, 0.45, 20000}, {4, 0.45, 20000}, {8, 0.45, 20000},
	} {
		b.Run(fmt.Sprintf("workers=%d/limit=%.2f/block=%d", tc.workers, tc.part, tc.block), func(b *testing.B) {
			config := func(ordered bool) *sim.Config {
				c := base
				c.Shape = plan.Shape{Nodes: 1, RanksPerNode: 1, WorkersPerRank: tc.workers}
				c.Plan.ShuffleBlockSize = tc.block
				c.CacheLimit = int64(float64(total) * tc.part)
				c.StepTime = sim.Fixed(0)
				c.OrderAdmissions = ordered
				return &c
			}
			var wall, cpu [2]time.Duration
			var reqs [2][]int
			var simReqs [2]int64
			var simWall [2]float64
			for i, ordered := range []bool{false, true} {
				rep, err := sim.Run(context.Background(), config(ordered))
				if err != nil {
					b.Fatal(err)
				}
				simReqs[i], simWall[i] = rep.StoreRequests, rep.WallS
			}
			for range b.N {
				for r := range rounds {
					for k := range 2 {
						i := (k + r) % 2 // alternate which goes first
						c0 := cputime.Process()
						m := store.read(b, config(i == 1))
						cpu[i] += cputime.Process() - c0
						wall[i] += m.elapsed
						reqs[i] = append(reqs[i], m.requests)
					}
				}
			}
			for _, r := range reqs[1] {
				// Taking turns, the requests are the plan's: exactly the
				// simulated ones (27 measured against 31 simulated with 2
				// workers before the slots stopped bounding the turns'
				// walks and the model counted refused fetches).
				if int64(r) != simReqs[1] {
					b.Errorf("taking turns: %d requests measured, %d simulated", r, simReqs[1])
				}
			}
			n := time.Duration(b.N * rounds)
			b.ReportMetric(float64(wall[0]/n)/1e6, "ms-wall-free")
			b.ReportMetric(float64(wall[1]/n)/1e6, "ms-wall-turns")
			b.ReportMetric(float64(wall[1])/float64(wall[0]), "wall-ratio")
			b.ReportMetric(float64(cpu[1])/float64(cpu[0]), "cpu-ratio")
			b.Logf("free: wall %s cpu %s requests %v (simulated %d, %.2fs); turns: wall %s cpu %s requests %v (simulated %d, %.2fs)",
				wall[0]/n, cpu[0]/n, reqs[0], simReqs[0], simWall[0], wall[1]/n, cpu[1]/n, reqs[1], simReqs[1], simWall[1])
		})
	}
}
