package stream_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/sluicedata/sluice/plan"
	"github.com/sluicedata/sluice/stream"
)

// BenchmarkWarmShuffled reads whole shuffled epochs (py1e, MosaicML's
// default) from a warm dataset of 2,000-sample shards, one consumer: a
// shuffled epoch interleaves the samples of many shards, so the reader
// changes shard at nearly every sample. Local: a local-only stream;
// cached: through a cache without a limit; limited: through a cache whose
// limit holds the dataset; cached-inorder: the cached case
// read in order, unshuffled, for comparison. It reports wall and CPU time
// (user and system, this process) a sample.
func BenchmarkWarmShuffled(b *testing.B) {
	const samples = 200_000
	dir := benchDataset(b, samples, 200, 450<<10, "")
	reg, _ := memDatasetFromDir(b, dir)
	for _, c := range []struct {
		name    string
		opts    func() *stream.Options
		inOrder bool
	}{
		{"local", func() *stream.Options { return &stream.Options{Local: dir} }, false},
		{"cached", func() *stream.Options {
			return &stream.Options{Remote: "mem://data", Local: b.TempDir(), Registry: reg}
		}, false},
		{"limited", func() *stream.Options {
			return &stream.Options{Remote: "mem://data", Local: b.TempDir(), Registry: reg, CacheLimit: 1 << 30}
		}, false},
		{"cached-inorder", func() *stream.Options {
			return &stream.Options{Remote: "mem://data", Local: b.TempDir(), Registry: reg}
		}, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			o := c.opts()
			o.BatchSize, o.Shuffle = 32, !c.inOrder
			ds, err := stream.Open(context.Background(), o)
			if err != nil {
				b.Fatal(err)
			}
			defer ds.Close()
			epoch := func() int64 {
				ep, err := ds.NewEpoch(context.Background(), plan.World{Nodes: 1, RanksPerNode: 1}, 1)
				if err != nil {
					b.Fatal(err)
				}
				it, err := ep.RankIter(context.Background())
				if err != nil {
					b.Fatal(err)
				}
				defer it.Close()
				var n int64
				for it.Next() {
					n++
				}
				if err := it.Err(); err != nil {
					b.Fatal(err)
				}
				return n
			}
			epoch() // warm: every shard local
			cpu0 := cpuTime(b)
			var n int64
			for b.Loop() {
				n += epoch()
			}
			if n != int64(b.N)*samples {
				b.Fatalf("%d samples in %d epochs, want %d each", n, b.N, samples)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/sample")
			b.ReportMetric(float64((cpuTime(b)-cpu0).Nanoseconds())/float64(n), "cpu-ns/sample")
		})
	}
}

// cpuTime returns the process's user and system CPU time so far: the
// figure to compare on a shared, loaded machine.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
