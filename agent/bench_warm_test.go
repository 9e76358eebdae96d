package agent

import (
	"context"
	"encoding/binary"
	"os"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluicedata/sluice/agentapi"
)

// BenchmarkAgentWarmShuffled measures the agent's batch path on a warm
// cache over shuffled (py1e) epochs: a shuffled epoch interleaves a
// block's shards, so the agent's reader changes shard at nearly every
// sample and takes and gives back the shard's cache lease each time. One
// worker, batches of 512, over the socket; through a cache without a limit
// and under one that holds the dataset. Two record sizes: 200,000 small
// samples (~25 bytes, like tokenized text) in shards of about 2,000, and
// (100KB/) 2,000 samples of 100 KB (like images) in shards of 40 (16KB/:
// 10,000 of 16 KB, 1MB/: 200 of 1 MB, in shards of 4 MiB). The
// client reads every record as the Python client does: inline from the
// reply, or from its shard's mapping (kept while the batch in hand lists
// the shard), and copies the 100 KB ones out. It reports wall and CPU
// time (this process: agent and client) a sample and the samples a reply
// carries, and checks each epoch's count, the sum of its sample IDs and
// each record's ID.
//
// limited-map/ asks for the records copied ahead under the limit in
// memory files it maps (agentapi.Next.MapCopies) rather than inline.
func BenchmarkAgentWarmShuffled(b *testing.B) {
	limits := []struct {
		name, limit string
		mapCopies   bool
	}{{"cached", "", false}, {"limited", "1gb", false}, {"limited-map", "1gb", true}}
	for _, c := range limits {
		b.Run(c.name, func(b *testing.B) {
			benchWarmShuffled(b, startAgentShards(b, 200_000, 64<<10, nil), 200_000, c.limit, false, c.mapCopies)
		})
	}
	for _, size := range []struct {
		name    string
		n, size int
	}{{"16KB", 10_000, 16_000}, {"100KB", 2_000, 100_000}, {"1MB", 200, 1_000_000}} {
		b.Run(size.name, func(b *testing.B) {
			for _, c := range limits {
				b.Run(c.name, func(b *testing.B) {
					h := startAgentShards(b, 1, 1<<10, nil)
					h.remote = b.TempDir()
					writePayloadDataset(b, h.remote, size.n, size.size, 4<<20)
					benchWarmShuffled(b, h, int64(size.n), c.limit, true, c.mapCopies)
				})
			}
		})
	}
}

// benchWarmShuffled runs BenchmarkAgentWarmShuffled's epochs of n samples
// over h's dataset under limit ("": none); payload says the records hold
// an id and a bytes column (writePayloadDataset), else an id and a text
// (writeDataset); mapCopies asks for copies in memory files.
func benchWarmShuffled(b *testing.B, h *harness, n int64, limit string, payload, mapCopies bool) {
	ctx := context.Background()
	cl, err := agentapi.Dial(ctx, h.sock, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ds := h.dataset()
	ds.CacheLimit = limit
	w := agentapi.World{WorldSize: 1, LocalWorldSize: 1, NumWorkers: 1}
	op, err := cl.Open(ctx, agentapi.Open{Dataset: ds, Job: "bench", World: w})
	if err != nil {
		b.Fatal(err)
	}
	maps := map[string][]byte{}
	defer func() {
		for _, m := range maps {
			unix.Munmap(m)
		}
	}()
	var out []byte
	var replies int64
	epoch := func() {
		it, err := cl.Begin(ctx, agentapi.Begin{Handle: op.Handle, World: w, MapCopies: mapCopies})
		if err != nil {
			b.Fatal(err)
		}
		var rel []int64
		var count, sum int64
		for {
			r, err := cl.Next(ctx, agentapi.Next{Iter: it.Iter, Max: 512, Release: rel, MapCopies: mapCopies})
			replies++
			if err != nil {
				b.Fatal(err)
			}
			if r.Done {
				break
			}
			rel = []int64{r.ID}
			mapShards(b, maps, r.Shards)
			for _, e := range r.Entries {
				var rec []byte
				if e.Ref&agentapi.InlineFlag != 0 {
					rec = r.Inline[e.Offset : e.Offset+uint64(e.Length)]
				} else if r.Shards[e.Ref].Mem != 0 {
					rec = r.Mapped[e.Ref][e.Offset : e.Offset+uint64(e.Length)]
				} else {
					rec = maps[r.Shards[e.Ref].Path][e.Offset : e.Offset+uint64(e.Length)]
				}
				// Records: u32 length of the variable column, then the
				// columns in name order: the id and the text, or the
				// payload and the id.
				id := rec[4:12]
				if payload {
					id = rec[len(rec)-8:]
					out = append(out[:0], rec[4:len(rec)-8]...)
				}
				if got := int64(binary.LittleEndian.Uint64(id)); got != e.Sample {
					b.Fatalf("the record of sample %d holds id %d", e.Sample, got)
				}
				count++
				sum += e.Sample
			}
		}
		cl.End(ctx, it.Iter)
		if count != n || sum != n*(n-1)/2 {
			b.Fatalf("an epoch gave %d samples summing to %d, want %d summing to %d", count, sum, n, n*(n-1)/2)
		}
	}
	epoch() // warm: every shard local
	cpu0, flt0 := cpuTime(b), minorFaults(b)
	replies = 0
	var epochs int64
	for b.Loop() {
		epoch()
		epochs++
	}
	samples := float64(epochs * n)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/samples, "ns/sample")
	b.ReportMetric(float64((cpuTime(b)-cpu0).Nanoseconds())/samples, "cpu-ns/sample")
	b.ReportMetric(samples/float64(replies), "samples/reply")
	b.ReportMetric(float64(minorFaults(b)-flt0)/samples, "faults/sample")
}

// mapShards keeps maps to the shard files a reply lists with a path, as
// the Python client does: a shard the reply lists stays mapped, the others
// are unmapped.
func mapShards(b *testing.B, maps map[string][]byte, shards []agentapi.BatchShard) {
	keep := make(map[string]bool, len(shards))
	for _, s := range shards {
		if s.Path == "" {
			continue
		}
		keep[s.Path] = true
		if _, ok := maps[s.Path]; ok {
			continue
		}
		f, err := os.Open(s.Path)
		if err != nil {
			b.Fatal(err)
		}
		m, err := unix.Mmap(int(f.Fd()), 0, int(s.Size), unix.PROT_READ, unix.MAP_SHARED)
		f.Close()
		if err != nil {
			b.Fatal(err)
		}
		maps[s.Path] = m
	}
	for p, m := range maps {
		if !keep[p] {
			unix.Munmap(m)
			delete(maps, p)
		}
	}
}

// minorFaults returns the process's minor page faults so far.
func minorFaults(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Minflt
}

// cpuTime returns the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
