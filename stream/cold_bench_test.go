package stream_test

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"golang.org/x/sync/errgroup"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/internal/cputime"
	"github.com/sluicedata/sluice/plan"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/s3store"
	"github.com/sluicedata/sluice/stream"
)

// coldConcurrency is the number of requests in flight of the raw GET
// references: the default prefetch concurrency of an Iterator.
const coldConcurrency = 8

// openBenchS3 opens a fresh prefix of the test S3 server (the
// SLUICE_TEST_S3_* variables; the benchmark is skipped without them).
func openBenchS3(b *testing.B, name string) *s3store.Bucket {
	b.Helper()
	ep := os.Getenv("SLUICE_TEST_S3_ENDPOINT")
	if ep == "" {
		b.Skip("no S3 server (run under .ci/with-services.sh)")
	}
	bk, err := s3store.New(context.Background(), os.Getenv("SLUICE_TEST_S3_BUCKET"),
		fmt.Sprintf("bench/%s-%d", name, time.Now().UnixNano()), &s3store.Options{
			Endpoint: ep, Region: os.Getenv("SLUICE_TEST_S3_REGION"),
			Credentials: credentials.NewStaticCredentialsProvider(
				os.Getenv("SLUICE_TEST_S3_ACCESS_KEY"), os.Getenv("SLUICE_TEST_S3_SECRET_KEY"), ""),
		})
	if err != nil {
		b.Fatal(err)
	}
	return bk
}

// coldMode is one way of reading a dataset's shards from the server,
// timed with the process's CPU time.
type coldMode struct {
	name string
	// run reads the dataset once and returns the bytes it counted and,
	// when not zero, the part of its time that counts for its rate (the
	// time to the last sample, for a stream whose Close still waits for
	// syncs).
	run            func(b *testing.B) (int64, time.Duration)
	wall, all, cpu time.Duration
	srv            time.Duration // the S3 server's CPU time (see serverPID)
	inflight       float64       // sum over passes of the mean GETs in flight
	firstGET       time.Duration // sum over passes of the time to the first shard GET
	bytes, ops     int64
	rates          []float64 // MB/s of each pass
	// steady is, for the sluice pass, the MB/s of each pass once its
	// first sample is out: the bytes after the first shard (an average
	// one) over the time from the first sample to the last.
	steady []float64
}

// BenchmarkColdS3 measures, side by side in one run against the same S3
// server, three ways of reading a whole dataset into an empty node:
//
//   - rawGET: coldConcurrency whole-object GETs in parallel, bytes
//     discarded (the server's rate);
//   - rawFile: the same GETs into temporary files that are synced and
//     renamed into place (what a durable cache must at least do);
//   - sluice: stream.Open over the server with an empty cache and one
//     full pass of the epoch through an Iterator (index GET, plan,
//     prefetch, fetch into the cache, every sample read).
//
// Each iteration runs all three, in an order rotated per iteration, so
// that the load of a shared machine falls on all of them alike. Figures:
// MB/s of each (shard bytes; sluice's time ends at its last sample, and
// sluice+close also counts its Close, which waits for the last syncs),
// sluice as a percentage of each, the median over iterations of sluice's
// percentage of the raw GETs of the same iteration, and each mode's
// client CPU time per MB and, under .ci/with-services.sh, the S3
// server's. Every pass checks the sample count and an id checksum.
func BenchmarkColdS3(b *testing.B) {
	for _, shard := range []int64{4 << 20, 16 << 20} {
		b.Run(fmt.Sprintf("shard=%dMB", shard>>20), func(b *testing.B) {
			fm := &flightMeter{Bucket: openBenchS3(b, "cold")}
			bk := storage.Bucket(fm)
			const samples, size = 1280, 100 << 10
			src := benchDataset(b, samples, size, shard, "")
			keys := uploadDir(b, src, bk)
			var shardBytes int64
			for _, k := range keys {
				fi, err := os.Stat(filepath.Join(src, k))
				if err != nil {
					b.Fatal(err)
				}
				shardBytes += fi.Size()
			}
			reg := &storage.Registry{}
			reg.Register("bench", func(context.Context, *url.URL) (storage.Bucket, error) { return fm, nil })
			sc := &scratch{b: b}
			var steadyRate float64 // of the last sluice pass
			modes := []*coldMode{
				{name: "rawGET", run: func(b *testing.B) (int64, time.Duration) { return parallelGETs(b, bk, keys, ""), 0 }},
				{name: "rawFile", run: func(b *testing.B) (int64, time.Duration) {
					return parallelGETs(b, bk, keys, sc.dir()), 0
				}},
				{name: "sluice", run: func(b *testing.B) (int64, time.Duration) {
					n, d, first := coldPass(b, reg, sc.dir(), samples, size, shardBytes)
					if d > first {
						firstShard := shardBytes / int64(len(keys)) // an average shard
						steadyRate = float64(n-firstShard) / (d - first).Seconds() / 1e6
					}
					return n, d
				}},
			}
			// One unmeasured pass of each: connections, page cache, server.
			for _, m := range modes {
				m.run(b)
			}
			srvPID := serverPID("s3")
			b.ResetTimer()
			i := 0
			for b.Loop() {
				for k := range modes {
					m := modes[(i+k)%len(modes)]
					fm.reset()
					start, c0, s0 := time.Now(), cputime.Process(), processCPU(srvPID)
					var n int64
					var d time.Duration
					// Labelled for profiles (-cpuprofile, then pprof
					// -tagfocus mode=sluice): goroutines started within,
					// the cache's fetches among them, carry the label.
					pprof.Do(context.Background(), pprof.Labels("mode", m.name), func(context.Context) { n, d = m.run(b) })
					all := time.Since(start)
					m.cpu += cputime.Process() - c0
					if srvPID > 0 {
						m.srv += processCPU(srvPID) - s0
					}
					if d == 0 {
						d = all
					}
					in, fg := fm.mean(d)
					m.inflight += in
					m.firstGET += fg
					m.bytes += n
					m.wall += d
					m.all += all
					m.ops++
					m.rates = append(m.rates, float64(n)/d.Seconds()/1e6)
					if m.name == "sluice" {
						m.steady = append(m.steady, steadyRate)
					}
					b.StopTimer()
					sc.drop()
					b.StartTimer()
				}
				i++
			}
			rate := func(m *coldMode) float64 { return float64(m.bytes) / m.wall.Seconds() / 1e6 }
			for _, m := range modes {
				b.ReportMetric(rate(m), m.name+"-MB/s")
				b.ReportMetric(float64(m.cpu.Microseconds())/1e3/(float64(m.bytes)/1e6), m.name+"-cpu-ms/MB")
				// How well the mode kept the store busy: the mean GETs
				// in flight over its counted time (at most
				// coldConcurrency), and the start's gap before its first
				// shard GET.
				b.ReportMetric(m.inflight/float64(m.ops), m.name+"-inflight")
				b.ReportMetric(float64(m.firstGET.Microseconds())/1e3/float64(m.ops), m.name+"-ms-to-first-GET")
				if srvPID > 0 {
					// The server shares the machine's cores: on a
					// CPU-bound machine the rates follow the client's
					// and the server's CPU per MB together.
					b.ReportMetric(float64(m.srv.Microseconds())/1e3/(float64(m.bytes)/1e6), m.name+"-server-cpu-ms/MB")
				}
			}
			raw, file, sl := modes[0], modes[1], modes[2]
			if srvPID > 0 {
				// What the rates' ratio is where the machine's cores are
				// the bound (as on a loaded 2-core machine, where client
				// and server share them): the raw GETs' CPU per MB, the
				// client's and the server's, over sluice's. Less noisy
				// than the rates under a varying load.
				perMB := func(m *coldMode) float64 { return (m.cpu + m.srv).Seconds() / float64(m.bytes) }
				b.ReportMetric(perMB(raw)/perMB(sl)*100, "cpu-%ofRawGET")
			}
			// With its Close (the last syncs and renames).
			b.ReportMetric(float64(sl.bytes)/sl.all.Seconds()/1e6, "sluice+close-MB/s")
			b.ReportMetric(rate(sl)/rate(raw)*100, "%ofRawGET")
			b.ReportMetric(rate(sl)/rate(file)*100, "%ofRawFile")
			// The median of the passes' ratios, each against the raw GETs
			// of its own iteration: robust to a neighbour's burst.
			ratios := make([]float64, len(sl.rates))
			for k := range ratios {
				ratios[k] = sl.rates[k] / raw.rates[k] * 100
			}
			slices.Sort(ratios)
			b.ReportMetric(ratios[len(ratios)/2], "median-%ofRawGET")
			// Once the first sample is out (the start, index GET and
			// first shard alone, is time to first sample's target).
			for k := range ratios {
				ratios[k] = sl.steady[k] / raw.rates[k] * 100
			}
			slices.Sort(ratios)
			b.ReportMetric(ratios[len(ratios)/2], "median-steady-%ofRawGET")
		})
	}
}

// scratch hands out directories for one pass each and removes them after
// it, so that passes do not pile gigabytes on the disk (a disk still
// writing back the last passes' files slows the next).
type scratch struct {
	b    *testing.B
	dirs []string
}

func (s *scratch) dir() string {
	dir, err := os.MkdirTemp("", "sluice-cold-")
	if err != nil {
		s.b.Fatal(err)
	}
	s.dirs = append(s.dirs, dir)
	s.b.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func (s *scratch) drop() {
	for _, d := range s.dirs {
		if err := os.RemoveAll(d); err != nil {
			s.b.Fatal(err)
		}
	}
	s.dirs = s.dirs[:0]
}

// parallelGETs reads every key with coldConcurrency GETs in parallel and
// returns the bytes read. With dir set, each object goes to a temporary
// file there that is synced and renamed into place (and the directory
// synced); else the bytes are discarded.
func parallelGETs(b *testing.B, bk storage.Bucket, keys []string, dir string) int64 {
	g, ctx := errgroup.WithContext(context.Background())
	g.SetLimit(coldConcurrency)
	counts := make([]int64, len(keys))
	for i, k := range keys {
		g.Go(func() error {
			r, err := bk.NewRangeReader(ctx, k, 0, -1)
			if err != nil {
				return err
			}
			defer r.Close()
			// A 1 MiB buffer filled before each write, as the cache's
			// downloads do (io.Copy read 8 KiB at a time into
			// io.Discard and wrote 32 KiB at a time into a file: more
			// system calls and CPU than sluice spends on the same
			// bytes, which slowed the references on a CPU-bound
			// machine).
			buf := make([]byte, 1<<20)
			if dir == "" {
				counts[i], err = fillCopy(io.Discard, r, buf)
				return err
			}
			f, err := os.CreateTemp(dir, ".tmp-*")
			if err != nil {
				return err
			}
			defer f.Close()
			if counts[i], err = fillCopy(f, r, buf); err != nil {
				return err
			}
			if err := f.Sync(); err != nil {
				return err
			}
			return os.Rename(f.Name(), filepath.Join(dir, k))
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	if dir != "" {
		d, err := os.Open(dir)
		if err != nil {
			b.Fatal(err)
		}
		if err := d.Sync(); err != nil {
			b.Fatal(err)
		}
		d.Close()
	}
	var total int64
	for _, n := range counts {
		total += n
	}
	return total
}

// fillCopy copies r to w, filling buf before each write, and returns the
// bytes copied.
func fillCopy(w io.Writer, r io.Reader, buf []byte) (int64, error) {
	var total int64
	for {
		n, err := io.ReadFull(r, buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return total, werr
			}
			total += int64(n)
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// coldPass opens the dataset into an empty cache, reads one rank's whole
// epoch, checking the count and the ids, and returns the shard bytes, the
// time to the last sample (its Close, deferred, is not in it) and the
// time to the first.
func coldPass(b *testing.B, reg *storage.Registry, local string, samples, size int, shardBytes int64) (int64, time.Duration, time.Duration) {
	ctx := context.Background()
	start := time.Now()
	ds, err := stream.Open(ctx, &stream.Options{Remote: "bench://x", Local: local, Registry: reg, BatchSize: 32})
	if err != nil {
		b.Fatal(err)
	}
	defer ds.Close()
	ep, err := ds.NewEpoch(ctx, plan.World{Nodes: 1, RanksPerNode: 1}, 1)
	if err != nil {
		b.Fatal(err)
	}
	it, err := ep.RankIter(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer it.Close()
	var n, ids, bytes int64
	var first time.Duration
	for it.Next() {
		if n == 0 {
			first = time.Since(start)
		}
		n++
		ids += it.ID()
		bytes += int64(len(it.Record()))
	}
	if err := it.Err(); err != nil {
		b.Fatal(err)
	}
	if n != int64(samples) || ids != int64(samples)*int64(samples-1)/2 {
		b.Fatalf("cold pass: %d samples with id sum %d, want %d and %d", n, ids, samples, samples*(samples-1)/2)
	}
	if bytes < int64(samples*size) {
		b.Fatalf("cold pass: %d bytes of samples, want at least %d", bytes, samples*size)
	}
	// Rates compare the bytes moved: the shards, a little more than
	// their samples.
	return shardBytes, time.Since(start), first
}

// BenchmarkColdS3FirstSample measures the time to the first sample of a
// dataset on the S3 server into an empty cache (stream.Open, epoch, first
// Next) against its reference, one plain index GET followed by one plain
// GET of the first shard, measured in the same iteration: x-2GETs is the
// ratio of the two (issue 17's target: at most 1.2). The reference reads
// each object with storage.ReadAll, whose buffer grows in fresh memory;
// x-2GETs-discard compares with the same GETs read into a reused buffer
// and discarded, the floor.
func BenchmarkColdS3FirstSample(b *testing.B) {
	fm := &flightMeter{Bucket: openBenchS3(b, "ttfs")}
	bk := storage.Bucket(fm)
	src := benchDataset(b, 640, 100<<10, 4<<20, "")
	uploadDir(b, src, bk)
	reg := &storage.Registry{}
	reg.Register("bench", func(context.Context, *url.URL) (storage.Bucket, error) { return fm, nil })
	// What the first sample spends besides its two requests: before the
	// index is asked for, and between the index's read and the first
	// shard's request (from the metering bucket), each pass's.
	var before, between []float64
	ctx := context.Background()
	ref := func() time.Duration {
		start := time.Now()
		for _, k := range []string{format.IndexFile, "shard.00000.mds"} {
			if _, err := storage.ReadAll(ctx, bk, k, 1<<30); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start)
	}
	// The same two GETs read into a reused buffer and discarded: the
	// floor, without ReadAll's growing buffer in fresh memory (which the
	// stream's reused blocks do not pay, so that it can beat ref).
	buf := make([]byte, 1<<20)
	floor := func() time.Duration {
		start := time.Now()
		for _, k := range []string{format.IndexFile, "shard.00000.mds"} {
			r, err := bk.NewRangeReader(ctx, k, 0, -1)
			if err != nil {
				b.Fatal(err)
			}
			_, err = fillCopy(io.Discard, r, buf)
			r.Close()
			if err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start)
	}
	first := func() time.Duration {
		local := b.TempDir()
		fm.reset()
		start := time.Now()
		ds, err := stream.Open(ctx, &stream.Options{Remote: "bench://x", Local: local, Registry: reg, BatchSize: 32})
		if err != nil {
			b.Fatal(err)
		}
		defer ds.Close()
		ep, err := ds.NewEpoch(ctx, plan.World{Nodes: 1, RanksPerNode: 1}, 1)
		if err != nil {
			b.Fatal(err)
		}
		it, err := ep.RankIter(ctx)
		if err != nil {
			b.Fatal(err)
		}
		defer it.Close()
		if !it.Next() {
			b.Fatal(it.Err())
		}
		d := time.Since(start)
		if bi, bt := fm.gaps(); bi >= 0 {
			before = append(before, float64(bi.Microseconds())/1e3)
			between = append(between, float64(bt.Microseconds())/1e3)
		}
		if it.ID() != 0 {
			b.Fatalf("first sample is %d, want 0", it.ID())
		}
		return d
	}
	ref()
	floor()
	first()
	before, between = before[:0], between[:0]
	var refSum, floorSum, firstSum time.Duration
	var ratios, floorRatios []float64
	b.ResetTimer()
	i := 0
	for b.Loop() {
		// The three in an order rotated per iteration.
		var r, fl, f time.Duration
		for k := range 3 {
			switch (i + k) % 3 {
			case 0:
				r = ref()
			case 1:
				fl = floor()
			case 2:
				f = first()
			}
		}
		refSum += r
		floorSum += fl
		firstSum += f
		ratios = append(ratios, float64(f)/float64(r))
		floorRatios = append(floorRatios, float64(f)/float64(fl))
		i++
	}
	n := float64(i)
	b.ReportMetric(float64(firstSum.Microseconds())/1e3/n, "ms-first-sample")
	b.ReportMetric(float64(refSum.Microseconds())/1e3/n, "ms-2GETs")
	b.ReportMetric(float64(floorSum.Microseconds())/1e3/n, "ms-2GETs-discard")
	b.ReportMetric(float64(firstSum)/float64(refSum), "x-2GETs")
	// The median of each iteration's ratio: robust to a neighbour's
	// burst (a slow fsync, a descheduled server) in one of them.
	slices.Sort(ratios)
	b.ReportMetric(ratios[len(ratios)/2], "median-x-2GETs")
	slices.Sort(floorRatios)
	b.ReportMetric(floorRatios[len(floorRatios)/2], "median-x-2GETs-discard")
	if len(before) > 0 {
		slices.Sort(before)
		slices.Sort(between)
		b.ReportMetric(before[len(before)/2], "median-ms-before-index-GET")
		b.ReportMetric(between[len(between)/2], "median-ms-between-GETs")
	}
}
