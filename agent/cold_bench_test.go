package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sluicedata/sluice/agentapi"
	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/mds"
	"github.com/sluicedata/sluice/internal/cputime"
	"github.com/sluicedata/sluice/internal/s3test"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/s3store"
)

// BenchmarkAgentColdS3 measures the cold path of the Python client: an
// agent reads a dataset from the test S3 server into an empty cache and a
// client on its socket reads every sample's bytes from the shard files it
// is handed (as the Python client does, with pread here), one pass per
// iteration. Each pass starts a fresh agent on a fresh cache directory;
// the variants, alternated within each iteration, differ only in the
// agent cache's memory for shards (cache.Options.Memory). Figures: MB/s
// of shard bytes to the last sample, the process's CPU per MB (agent and
// client are both in it) and the median of each pass's rate over the
// first variant's of the same iteration. Every pass checks the sample
// count and an id checksum. Run under .ci/with-services.sh.
func BenchmarkAgentColdS3(b *testing.B) {
	srv := s3test.Require(b)
	for _, shard := range []int64{4 << 20, 16 << 20} {
		b.Run(fmt.Sprintf("shard=%dMB", shard>>20), func(b *testing.B) {
			prefix := s3test.NewPrefix("agent-cold")
			bk := srv.Open(b, prefix)
			const samples, size = 1280, 100 << 10
			src := b.TempDir()
			writePayloadDataset(b, src, samples, size, shard)
			s3test.UploadDir(b, bk, src)
			var shardBytes int64
			ents, _ := os.ReadDir(src)
			for _, e := range ents {
				if fi, err := e.Info(); err == nil && e.Name() != format.IndexFile {
					shardBytes += fi.Size()
				}
			}
			remote := srv.URL(srv.Endpoint, prefix)
			b.Setenv("AWS_EC2_METADATA_DISABLED", "true")
			b.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
			b.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
			type variant struct {
				name       string
				memory     int64
				wall, cpu  time.Duration
				rates      []float64
				passes     int64
				totalBytes int64
			}
			vs := []*variant{{name: "files", memory: 0}, {name: "memory", memory: 256 << 20}}
			pass := func(v *variant) {
				reg := &storage.Registry{}
				reg.Register("s3", s3store.Open)
				a, err := New(&Options{Registry: reg, IdleTimeout: -1})
				if err != nil {
					b.Fatal(err)
				}
				a.cacheMemory = v.memory
				local := b.TempDir()
				start, c0 := time.Now(), cputime.Process()
				dial, stop := serveStoppable(b, a)
				n, ids, got := readAgentPass(b, dial(), remote, filepath.Join(local, "cache"))
				d := time.Since(start)
				stop()
				cpu := cputime.Process() - c0
				if n != samples || ids != int64(samples)*int64(samples-1)/2 || got < int64(samples*size) {
					b.Fatalf("%s pass: %d samples, id sum %d, %d bytes", v.name, n, ids, got)
				}
				v.wall += d
				v.cpu += cpu
				v.passes++
				v.totalBytes += shardBytes
				v.rates = append(v.rates, float64(shardBytes)/d.Seconds()/1e6)
				os.RemoveAll(local)
			}
			for _, v := range vs {
				pass(v) // unmeasured: connections, server, page cache
				v.wall, v.cpu, v.rates, v.passes, v.totalBytes = 0, 0, nil, 0, 0
			}
			b.ResetTimer()
			i := 0
			for b.Loop() {
				for k := range vs {
					pass(vs[(i+k)%len(vs)])
				}
				i++
			}
			for _, v := range vs {
				mb := float64(v.totalBytes) / 1e6
				b.ReportMetric(mb/v.wall.Seconds(), v.name+"-MB/s")
				b.ReportMetric(float64(v.cpu.Microseconds())/1e3/mb, v.name+"-cpu-ms/MB")
			}
			ratios := make([]float64, len(vs[0].rates))
			for k := range ratios {
				ratios[k] = vs[1].rates[k] / vs[0].rates[k] * 100
			}
			slices.Sort(ratios)
			b.ReportMetric(ratios[len(ratios)/2], "median-memory-%offiles")
		})
	}
}

// serveStoppable serves a on a socket in a temp dir and returns a dialer
// and a function that stops the agent (closing its caches) and waits for
// it.
func serveStoppable(b *testing.B, a *Agent) (func() *agentapi.Client, func()) {
	b.Helper()
	dir := b.TempDir()
	lock, err := AcquireLock(filepath.Join(dir, "agent"))
	if err != nil {
		b.Fatal(err)
	}
	ln, err := lock.Listen()
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Serve(ctx, ln) }()
	var clients []*agentapi.Client
	dial := func() *agentapi.Client {
		c, err := agentapi.Dial(context.Background(), SocketPath(filepath.Join(dir, "agent")), nil)
		if err != nil {
			b.Fatal(err)
		}
		clients = append(clients, c)
		return c
	}
	stop := func() {
		for _, c := range clients {
			c.Close()
		}
		cancel()
		select {
		case err := <-done:
			if err != nil {
				b.Errorf("Serve: %v", err)
			}
		case <-time.After(time.Minute):
			b.Fatal("agent did not stop in a minute")
		}
		lock.Release()
	}
	return dial, stop
}

// readAgentPass opens remote through c with its cache at local, reads one
// epoch of one rank, reading each sample's bytes from its shard file, and
// returns the count, the id sum and the bytes read.
func readAgentPass(b *testing.B, c *agentapi.Client, remote, local string) (n, ids, bytes int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	world := agentapi.World{WorldSize: 1, LocalWorldSize: 1}
	op, err := c.Open(ctx, agentapi.Open{Dataset: agentapi.Dataset{Remote: remote, Local: local, BatchSize: 32},
		Job: "cold", World: world})
	if err != nil {
		b.Fatal(err)
	}
	it, err := c.Begin(ctx, agentapi.Begin{Handle: op.Handle, World: world})
	if err != nil {
		b.Fatal(err)
	}
	files := map[string]*os.File{}
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	var buf []byte
	var rel []int64
	for {
		r, err := c.Next(ctx, agentapi.Next{Iter: it.Iter, Max: 32, Release: rel})
		if err != nil {
			b.Fatal(err)
		}
		rel = nil
		if r.ID != 0 {
			rel = []int64{r.ID}
		}
		if r.Done {
			break
		}
		for _, e := range r.Entries {
			var rec []byte
			if e.Ref&agentapi.InlineFlag != 0 {
				rec = r.Inline[e.Offset : e.Offset+uint64(e.Length)]
			} else {
				p := r.Shards[e.Ref].Path
				f, ok := files[p]
				if !ok {
					if f, err = os.Open(p); err != nil {
						b.Fatal(err)
					}
					files[p] = f
				}
				buf = slices.Grow(buf[:0], int(e.Length))[:e.Length]
				if _, err := f.ReadAt(buf, int64(e.Offset)); err != nil {
					b.Fatal(err)
				}
				rec = buf
			}
			n++
			ids += e.Sample
			bytes += int64(len(rec))
		}
	}
	c.End(ctx, it.Iter)
	return n, ids, bytes
}

// writePayloadDataset writes an MDS dataset of n samples with an id and
// size bytes of payload each, in shards of at most sizeLimit bytes.
func writePayloadDataset(b *testing.B, dir string, n, size int, sizeLimit int64) {
	b.Helper()
	w, err := mds.NewWriter(dir, &mds.WriterOptions{
		Columns:   map[string]string{"id": "int", "data": "bytes"},
		SizeLimit: sizeLimit,
	})
	if err != nil {
		b.Fatal(err)
	}
	payload := make([]byte, size)
	for i := range n {
		for k := range payload {
			payload[k] = byte(i + k)
		}
		if err := w.Write(format.Sample{"id": int64(i), "data": payload}); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Finish(); err != nil {
		b.Fatal(err)
	}
}
