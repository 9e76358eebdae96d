package stream_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/mds"
	"github.com/sluicedata/sluice/format/wds"
	"github.com/sluicedata/sluice/plan"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/filestore"
	"github.com/sluicedata/sluice/storage/memstore"
	"github.com/sluicedata/sluice/storage/s3store"
	"github.com/sluicedata/sluice/stream"
)

// benchSample is sample i of the benchmarks: a payload-byte "jpg" and a
// "cls".
func benchSample(i, payload int) (string, []byte, []byte) {
	body := make([]byte, payload)
	for j := range body {
		body[j] = byte(i*31 + j)
	}
	return fmt.Sprintf("s%08d", i), body, []byte(fmt.Sprint(i % 1000))
}

// writeBenchTars writes samples into tars of about shardBytes each in dir,
// and returns their keys.
func writeBenchTars(b testing.TB, dir string, samples, payload int, shardBytes int) []string {
	b.Helper()
	var keys []string
	var buf bytes.Buffer
	w := wds.NewWriter(&buf)
	flush := func() {
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
		k := fmt.Sprintf("shard-%06d.tar", len(keys))
		if err := os.WriteFile(filepath.Join(dir, k), buf.Bytes(), 0o644); err != nil {
			b.Fatal(err)
		}
		keys = append(keys, k)
		buf.Reset()
		w = wds.NewWriter(&buf)
	}
	for i := range samples {
		key, jpg, cls := benchSample(i, payload)
		if err := w.Write(key, map[string][]byte{"jpg": jpg, "cls": cls}); err != nil {
			b.Fatal(err)
		}
		if buf.Len() >= shardBytes {
			flush()
		}
	}
	if buf.Len() > 0 {
		flush()
	}
	return keys
}

// BenchmarkWarmTarVsMDS reads one epoch of the same samples (20 KB jpg +
// cls) from a warm local tar dataset and from the same samples in MDS,
// through the Go API: records (views) and decoded samples.
func BenchmarkWarmTarVsMDS(b *testing.B) {
	const samples, payload = 20_000, 20 << 10
	tarDir, mdsDir := b.TempDir(), b.TempDir()
	keys := writeBenchTars(b, tarDir, samples, payload, 64<<20)
	fb, err := filestore.New(tarDir)
	if err != nil {
		b.Fatal(err)
	}
	idx, err := stream.BuildTarIndex(context.Background(), fb, keys, nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tarDir, format.IndexFile), format.AppendIndex(nil, idx), 0o644); err != nil {
		b.Fatal(err)
	}
	mw, err := mds.NewWriter(mdsDir, &mds.WriterOptions{Columns: map[string]string{"__key__": "str", "jpg": "bytes", "cls": "bytes"}, SizeLimit: 64 << 20})
	if err != nil {
		b.Fatal(err)
	}
	for i := range samples {
		key, jpg, cls := benchSample(i, payload)
		if err := mw.Write(format.Sample{"__key__": key, "jpg": jpg, "cls": cls}); err != nil {
			b.Fatal(err)
		}
	}
	if err := mw.Finish(); err != nil {
		b.Fatal(err)
	}
	for _, kind := range []string{"tar", "mds"} {
		for _, decode := range []bool{false, true} {
			name := kind + "-record"
			if decode {
				name = kind + "-sample"
			}
			b.Run(name, func(b *testing.B) {
				dir := tarDir
				if kind == "mds" {
					dir = mdsDir
				}
				ds, err := stream.Open(context.Background(), &stream.Options{Local: dir, BatchSize: 32})
				if err != nil {
					b.Fatal(err)
				}
				defer ds.Close()
				read := func() int64 {
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
						if decode {
							s, err := it.Sample()
							if err != nil {
								b.Fatal(err)
							}
							if len(s["jpg"].([]byte)) != payload {
								b.Fatal("short jpg")
							}
						} else if len(it.Record()) < payload {
							b.Fatal("short record")
						}
						n++
					}
					if err := it.Err(); err != nil {
						b.Fatal(err)
					}
					return n
				}
				read() // warm
				b.ReportAllocs()
				var n int64
				b.ResetTimer()
				for b.Loop() {
					n += read()
				}
				b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "samples/s")
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/sample")
			})
		}
	}
}

// BenchmarkTarIndexBuild indexes 64 MB tars of 20 KB members from the
// loopback S3 server (SLUICE_TEST_S3_*; skipped without one), from a
// local directory and, with SLUICE_BENCH_MEMSTORE set, from memory, and
// reports tars/s and CPU per tar. The s3-get case reads the same tars
// whole, one GET each through a 1 MiB buffer, 16 at once, and discards
// them: the floor an index build of dense tars cannot go under, since
// every byte of such a tar crosses the socket. SLUICE_BENCH_TARS sets the
// number of tars (16).
func BenchmarkTarIndexBuild(b *testing.B) {
	shards := 16
	if v := os.Getenv("SLUICE_BENCH_TARS"); v != "" {
		fmt.Sscan(v, &shards)
	}
	src := b.TempDir()
	keys := writeBenchTars(b, src, shards*64<<20/(20<<10+1536), 20<<10, 64<<20)
	buckets := map[string]storage.Bucket{}
	fb, err := filestore.New(src)
	if err != nil {
		b.Fatal(err)
	}
	buckets["filestore"] = fb
	if os.Getenv("SLUICE_BENCH_MEMSTORE") != "" {
		// The same tars in memory: the index build's own CPU, without
		// sockets or files (compare cpu-ms/tar across builds).
		mb := memstore.New("bench")
		uploadDir(b, src, mb)
		buckets["memstore"] = mb
	}
	if ep := os.Getenv("SLUICE_TEST_S3_ENDPOINT"); ep != "" {
		bk, err := s3store.New(context.Background(), os.Getenv("SLUICE_TEST_S3_BUCKET"),
			fmt.Sprintf("bench/tarindex-%d", time.Now().UnixNano()), &s3store.Options{
				Endpoint: ep, Region: os.Getenv("SLUICE_TEST_S3_REGION"),
				Credentials: credentials.NewStaticCredentialsProvider(
					os.Getenv("SLUICE_TEST_S3_ACCESS_KEY"), os.Getenv("SLUICE_TEST_S3_SECRET_KEY"), ""),
			})
		if err != nil {
			b.Fatal(err)
		}
		uploadDir(b, src, bk)
		buckets["s3"], buckets["s3-get"] = bk, bk
	}
	// SLUICE_BENCH_PARALLEL: shards read at once (the default's when
	// unset), for the s3-get case too.
	opts, getParallel := &stream.TarIndexOptions{}, 16
	if v := os.Getenv("SLUICE_BENCH_PARALLEL"); v != "" {
		fmt.Sscan(v, &opts.Parallel)
		getParallel = opts.Parallel
	}
	for _, name := range []string{"memstore", "filestore", "s3", "s3-get"} {
		bk, ok := buckets[name]
		if !ok {
			continue
		}
		b.Run(name, func(b *testing.B) {
			reg := &storage.Registry{}
			reg.Register("bench", func(context.Context, *url.URL) (storage.Bucket, error) { return bk, nil })
			var n int
			stop := profileCPU(b, name)
			defer stop()
			cpu0, srv0 := processCPU(0), processCPU(serverPID(name))
			sys0 := processSys()
			for b.Loop() {
				if name == "s3-get" {
					getWhole(b, bk, keys, getParallel)
					n += len(keys)
					continue
				}
				idx, err := stream.BuildTarIndex(context.Background(), bk, keys, opts)
				if err != nil {
					b.Fatal(err)
				}
				n += len(idx.Shards)
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "tars/s")
			// CPU per tar, less sensitive than tars/s to other load on a
			// shared machine: this process's (user+system, and system
			// alone), and the S3 server's (see serverPID).
			b.ReportMetric((processCPU(0)-cpu0).Seconds()*1e3/float64(n), "cpu-ms/tar")
			b.ReportMetric((processSys()-sys0).Seconds()*1e3/float64(n), "sys-ms/tar")
			if pid := serverPID(name); pid > 0 {
				b.ReportMetric((processCPU(pid)-srv0).Seconds()*1e3/float64(n), "server-cpu-ms/tar")
			} else if strings.HasPrefix(name, "s3") {
				b.Log("no server-cpu-ms/tar: set SLUICE_BENCH_S3_PID to the S3 server's PID, or run under .ci/with-services.sh")
			}
		})
	}
}

// getWhole reads the objects keys under bk whole, parallel at once, and
// discards their bytes.
func getWhole(b *testing.B, bk storage.Bucket, keys []string, parallel int) {
	next := make(chan string)
	var wg sync.WaitGroup
	for range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 1<<20)
			for k := range next {
				rc, err := bk.NewRangeReader(context.Background(), k, 0, -1)
				if err != nil {
					b.Error(err)
					continue
				}
				// Both wrapped: io.Discard's ReadFrom would read 8 KiB at
				// a time, not through buf.
				if _, err := io.CopyBuffer(struct{ io.Writer }{io.Discard}, struct{ io.Reader }{rc}, buf); err != nil {
					b.Error(err)
				}
				rc.Close()
			}
		}()
	}
	for _, k := range keys {
		next <- k
	}
	close(next)
	wg.Wait()
}

// profileCPU writes a CPU profile of the rest of the benchmark to
// $SLUICE_BENCH_CPUPROFILE.name when that is set (the shards' set-up and
// upload stay out of it), and returns the function that stops it.
func profileCPU(b *testing.B, name string) func() {
	p := os.Getenv("SLUICE_BENCH_CPUPROFILE")
	if p == "" {
		return func() {}
	}
	f, err := os.Create(p + "." + name)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Error(err)
		}
	}
}

// serverPID returns the S3 server's process ID for the s3 cases: from
// SLUICE_BENCH_S3_PID when set, else from the pid file that
// .ci/with-services.sh's versitygw leaves in $SLUICE_CI_DIR (checked to be
// a running versitygw); 0 when neither names a process. (A PID taken from
// `pgrep -f versitygw` may name the shell that ran pgrep, or another
// session's server: the reported server CPU was then 0.)
func serverPID(name string) int {
	if !strings.HasPrefix(name, "s3") {
		return 0
	}
	pid := 0
	if v := os.Getenv("SLUICE_BENCH_S3_PID"); v != "" {
		fmt.Sscan(v, &pid)
		return pid
	}
	dir := os.Getenv("SLUICE_CI_DIR")
	if dir == "" {
		return 0
	}
	b, err := os.ReadFile(filepath.Join(dir, "s3.pid"))
	if err != nil {
		return 0
	}
	if _, err := fmt.Sscan(string(b), &pid); err != nil || pid <= 0 {
		return 0
	}
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil || strings.TrimSpace(string(comm)) != "versitygw" {
		return 0
	}
	return pid
}

// processCPU returns the user+system CPU time of process pid (0: this
// one), read from /proc; 0 where that is not available.
func processCPU(pid int) time.Duration {
	user, sys := processTimes(pid)
	return user + sys
}

// processSys returns this process's system CPU time (see processCPU).
func processSys() time.Duration {
	_, sys := processTimes(0)
	return sys
}

// processTimes returns the user and system CPU times of process pid (0:
// this one), read from /proc; zeros where that is not available.
func processTimes(pid int) (user, sys time.Duration) {
	p := "/proc/self/stat"
	if pid > 0 {
		p = fmt.Sprintf("/proc/%d/stat", pid)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, 0
	}
	// Fields after the command name (which may hold spaces) in ")".
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, 0
	}
	var ut, st int64
	fmt.Sscan(f[11], &ut)
	fmt.Sscan(f[12], &st)
	return time.Duration(ut) * time.Second / 100, time.Duration(st) * time.Second / 100 // USER_HZ
}
