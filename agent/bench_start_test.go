//go:build unix

package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/sluicedata/sluice/agentapi"
	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/mds"
)

// bigShardedDataset writes a dataset of n shards of 100 samples into dir:
// one real shard hard-linked under n names and an index.json listing
// them all (a 40k-shard index of ~5 MB, without 40k shards' bytes).
func bigShardedDataset(b *testing.B, dir string, n int) {
	b.Helper()
	tmpl := b.TempDir()
	w, err := mds.NewWriter(tmpl, &mds.WriterOptions{Columns: map[string]string{"id": "int", "text": "str"}})
	if err != nil {
		b.Fatal(err)
	}
	for i := range 100 {
		if err := w.Write(format.Sample{"id": int64(i), "text": fmt.Sprintf("sample %d", i)}); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Finish(); err != nil {
		b.Fatal(err)
	}
	info := w.Shards()[0]
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	idx := &format.Index{Shards: make([]format.ShardInfo, n)}
	for k := range n {
		s := info
		s.RawData.Basename = fmt.Sprintf("shard.%05d.mds", k)
		if err := os.Link(filepath.Join(tmpl, info.RawData.Basename), filepath.Join(dir, s.RawData.Basename)); err != nil {
			b.Fatal(err)
		}
		idx.Shards[k] = s
	}
	if err := os.WriteFile(filepath.Join(dir, format.IndexFile), format.AppendIndex(nil, idx), 0o644); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkStartAtScale measures an agent starting a job on a 40k-shard
// dataset whose index is local (in the cache directory), from the open
// to each consumer's first batch, with a dataset the agent has not
// opened before (a new shuffle seed each time; py1e):
//
//   - workers=8: one rank with 8 DataLoader workers (a cursor each);
//   - rank0-160x8: rank 0 worker 0 of 160 ranks (20 nodes × 8) × 8 workers.
//
// heap-MB is the live heap once every consumer has its first batch (the
// agent's dataset and cursors), measured on the last round; cpu-ms/op is
// the process's CPU time (without that measurement's GC). The guard checks every first batch is full.
func BenchmarkStartAtScale(b *testing.B) {
	dir := b.TempDir()
	remote, local := filepath.Join(dir, "remote"), filepath.Join(dir, "cache")
	bigShardedDataset(b, remote, 40_000)
	bigShardedDataset(b, filepath.Join(local), 40_000) // the index (and shards) already local
	for _, mode := range []struct {
		name    string
		world   agentapi.World
		workers int
	}{
		{"workers=8", agentapi.World{WorldSize: 1, LocalWorldSize: 1, NumWorkers: 8}, 8},
		{"rank0-160x8", agentapi.World{WorldSize: 160, LocalWorldSize: 8, NumWorkers: 8}, 1},
	} {
		b.Run(mode.name, func(b *testing.B) {
			a, err := New(&Options{Registry: testRegistry(), IdleTimeout: -1})
			if err != nil {
				b.Fatal(err)
			}
			sockDir := b.TempDir()
			lock, err := AcquireLock(filepath.Join(sockDir, "agent"))
			if err != nil {
				b.Fatal(err)
			}
			defer lock.Release()
			ln, err := lock.Listen()
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- a.Serve(ctx, ln) }()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					b.Errorf("Serve: %v", err)
				}
			}()
			sock := SocketPath(filepath.Join(sockDir, "agent"))
			var heap float64
			var excluded time.Duration // the heap measurement's GC
			seed := int64(0)
			b.ReportAllocs()
			cpu := cpuTime()
			for b.Loop() {
				seed++
				c, err := agentapi.Dial(ctx, sock, nil)
				if err != nil {
					b.Fatal(err)
				}
				ds := agentapi.Dataset{Remote: remote, Local: local, BatchSize: 32, Shuffle: true, ShuffleSeed: &seed}
				op, err := c.Open(ctx, agentapi.Open{Dataset: ds, Job: fmt.Sprint("job", seed), World: mode.world})
				if err != nil {
					b.Fatal(err)
				}
				for w := range mode.workers {
					wo := mode.world
					wo.Worker = w
					it, err := c.Begin(ctx, agentapi.Begin{Handle: op.Handle, World: wo})
					if err != nil {
						b.Fatal(err)
					}
					// The first batch: 32 samples (a reply may stop short
					// at a shard not yet ready).
					for got := 0; got < 32; {
						r, err := c.Next(ctx, agentapi.Next{Iter: it.Iter, Max: 32 - got})
						if err != nil || r.Done {
							b.Fatalf("first batch of worker %d: %d entries, done %v, %v", w, got, r.Done, err)
						}
						got += len(r.Entries)
					}
				}
				b.StopTimer()
				gc0 := cpuTime()
				runtime.GC()
				var m runtime.MemStats
				runtime.ReadMemStats(&m)
				heap = float64(m.HeapAlloc) / 1e6
				excluded += cpuTime() - gc0
				b.StartTimer()
				// Closing the connection releases its handles (and with
				// the last, the dataset and the job's cursors).
				c.Close()
				a.mu.Lock()
				for len(a.conns) > 0 {
					a.gone.Wait()
				}
				a.mu.Unlock()
			}
			b.ReportMetric(float64(cpuTime()-cpu-excluded)/float64(b.N)/1e6, "cpu-ms/op")
			b.ReportMetric(heap, "heap-MB")
		})
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
