package sim_test

import (
	"context"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/mds"
	"github.com/sluicedata/sluice/plan"
	"github.com/sluicedata/sluice/sim"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/s3store"
	"github.com/sluicedata/sluice/storage/storagetest"
	"github.com/sluicedata/sluice/stream"
)

// Timing tolerance of the validation: |measured − simulated| ≤ relTol ×
// simulated + absTol. CI runs on two shared cores under -race; the error
// measured there is in docs/input-bound.md.
const (
	relTol = 0.35
	absTol = 150 * time.Millisecond
	// evictTol bounds the error on bytes when the cache evicts under
	// several DataLoader workers.
	evictTol = 0.15
)

func s3Env(t testing.TB) (endpoint, bucket, region, key, secret string) {
	endpoint = os.Getenv("SLUICE_TEST_S3_ENDPOINT")
	if endpoint == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("SLUICE_TEST_S3_ENDPOINT is not set under CI (.ci/services.sh starts the S3 server)")
		}
		t.Skip("SLUICE_TEST_S3_ENDPOINT not set; run under .ci/with-services.sh")
	}
	return endpoint, os.Getenv("SLUICE_TEST_S3_BUCKET"), os.Getenv("SLUICE_TEST_S3_REGION"),
		os.Getenv("SLUICE_TEST_S3_ACCESS_KEY"), os.Getenv("SLUICE_TEST_S3_SECRET_KEY")
}

// writeMDS writes samples × payload bytes in shards of at most sizeLimit.
func writeMDS(t testing.TB, dir string, samples, payload int, sizeLimit int64) {
	w, err := mds.NewWriter(dir, &mds.WriterOptions{
		Columns: map[string]string{"id": "int", "data": "bytes"}, SizeLimit: sizeLimit})
	if err != nil {
		t.Fatal(err)
	}
	for i := range samples {
		b := make([]byte, payload)
		for j := range b {
			b[j] = byte(i + j)
		}
		if err := w.Write(format.Sample{"id": int64(i), "data": b}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
}

type measured struct {
	firstBatch, wait, elapsed time.Duration
	requests                  int
	bytes                     int64
	samples                   int64
	start                     time.Time // the iteration's start
	timings                   []storagetest.Timing
}

// shapedStore is a dataset uploaded to a fresh prefix of the S3 server,
// reached through a shaping proxy (Config.Store's latency and bandwidth).
type shapedStore struct {
	reg   *storage.Registry
	proxy *storagetest.ShapingProxy
}

// uploadShaped uploads the dataset in src to a fresh prefix of the S3
// server and starts a shaping proxy in front of it (closed with the test).
func uploadShaped(t testing.TB, src string, c *sim.Config) *shapedStore {
	endpoint, bucketName, region, key, secret := s3Env(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	prefix := fmt.Sprintf("simvalidate/%d", time.Now().UnixNano())
	creds := credentials.NewStaticCredentialsProvider(key, secret, "")
	direct, err := s3store.New(ctx, bucketName, prefix, &s3store.Options{Endpoint: endpoint, Region: region, Credentials: creds})
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		w, err := direct.NewWriter(ctx, e.Name(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	proxy, err := storagetest.NewShapingProxy(endpoint, storagetest.Shaping{
		Latency: c.Store.Latency, Bandwidth: c.Store.BandwidthPerNode})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	reg := &storage.Registry{}
	reg.Register("shaped", func(ctx context.Context, _ *url.URL) (storage.Bucket, error) {
		// A bucket of its own per Open (the Dataset closes it).
		return s3store.New(ctx, bucketName, prefix, &s3store.Options{Endpoint: proxy.URL, Region: region, Credentials: creds})
	})
	return &shapedStore{reg: reg, proxy: proxy}
}

// streamShaped reads one rank's epoch as `sluice stream` does (RankIter,
// a sleep of stepTime after each batch) from S3 through the shaper.
func streamShaped(t testing.TB, src string, c *sim.Config) measured {
	return uploadShaped(t, src, c).read(t, c)
}

// read reads one rank's epoch of the store into a fresh cache: as
// `sluice stream` does with c.RankIterator (RankIter, a sleep of the step
// time after each batch), else as the agent's DataLoader workers
// (workersShaped). Its figures are this read's alone.
func (s *shapedStore) read(t testing.TB, c *sim.Config) measured {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	proxy := s.proxy
	before, bytesBefore, timingsBefore := proxy.Requests(""), proxy.Bytes(), len(proxy.Timings())
	seed := *c.Plan.ShuffleSeed
	ds, err := stream.Open(ctx, &stream.Options{Remote: "shaped://validate", Local: t.TempDir(), Registry: s.reg,
		BatchSize: c.Plan.BatchSize, Shuffle: c.Plan.Shuffle, ShuffleAlgo: c.Plan.ShuffleAlgo, ShuffleSeed: &seed,
		ShuffleBlockSize: c.Plan.ShuffleBlockSize, CacheLimit: c.CacheLimit, Predownload: c.Predownload, PrefetchConcurrency: c.PrefetchConcurrency,
		OrderAdmissions: c.OrderAdmissions})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	if !c.RankIterator {
		m := workersShaped(ctx, t, ds, c)
		m.requests, m.bytes, m.timings = proxy.Requests("")-before, proxy.Bytes()-bytesBefore, proxy.Timings()[timingsBefore:]
		return m
	}
	ep, err := ds.NewEpoch(ctx, plan.World{Nodes: 1, RanksPerNode: 1}, 1)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	it, err := ep.RankIter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	step := c.StepTime.(sim.Fixed)
	var n int64
	var firstBatch time.Duration
	for it.Next() {
		n++
		if n == int64(c.Plan.BatchSize) {
			firstBatch = time.Since(start)
		}
		if n%int64(c.Plan.BatchSize) == 0 {
			time.Sleep(time.Duration(step))
		}
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	it.Close()
	st := it.Stats()
	return measured{firstBatch: firstBatch, wait: st.Wait, elapsed: st.Elapsed,
		requests: proxy.Requests("") - before, bytes: proxy.Bytes() - bytesBefore, samples: st.Samples,
		start: start, timings: proxy.Timings()[timingsBefore:]}
}

// workersShaped reads one rank's epoch as the agent and a PyTorch
// DataLoader do: one iterator per worker (Epoch.Iter), each read by its
// own goroutine one batch per request, the loop asking as torch's
// DataLoader does: prefetch_factor (Config.PrefetchFactor, 0: 2) batches
// of every worker at the start, then one more of worker j mod W each time
// it takes batch j; it takes the batches round-robin over the workers with
// a sleep of the step time after each.
func workersShaped(ctx context.Context, t testing.TB, ds *stream.Dataset, c *sim.Config) measured {
	W := c.Shape.WorkersPerRank
	P := c.PrefetchFactor
	if P == 0 {
		P = 2
	}
	ep, err := ds.NewEpoch(ctx, plan.World{Nodes: 1, RanksPerNode: 1}, W)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	its := make([]*stream.Iterator, W)
	for w := range W {
		if its[w], err = ep.Iter(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	B := int64(c.Plan.BatchSize)
	chs := make([]chan int64, W)
	asks := make([]chan struct{}, W)
	errs := make(chan error, W)
	for w, it := range its {
		chs[w] = make(chan int64, P)
		asks[w] = make(chan struct{}, P)
		for range P {
			asks[w] <- struct{}{}
		}
		go func() {
			defer close(chs[w])
			for {
				select {
				case <-asks[w]:
				case <-ctx.Done():
					errs <- ctx.Err()
					return
				}
				var n int64
				for n < B && it.Next() {
					n++
				}
				if n == 0 {
					break
				}
				chs[w] <- n
			}
			errs <- it.Err()
		}()
	}
	step := time.Duration(c.StepTime.(sim.Fixed))
	var m measured
	m.start = start
	var waited time.Duration
	for open := W; open > 0; {
		open = 0
		for w := range W {
			t0 := time.Now()
			n, ok := <-chs[w]
			if !ok {
				continue
			}
			asks[w] <- struct{}{}
			open++
			waited += time.Since(t0)
			if m.samples == 0 {
				m.firstBatch = time.Since(start)
			}
			m.samples += n
			time.Sleep(step)
		}
	}
	m.elapsed = time.Since(start)
	m.wait = waited
	for range W {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for _, it := range its {
		it.Close()
	}
	return m
}

// within returns the relative error of got against want (seconds),
// adding a message to errs when it is off by more than the tolerance.
func within(errs *[]string, name string, got time.Duration, want float64) float64 {
	w := time.Duration(want * float64(time.Second))
	diff := math.Abs(float64(got - w))
	if diff > relTol*float64(w)+float64(absTol) {
		*errs = append(*errs, fmt.Sprintf("%s: measured %s, simulated %s: off by more than %.0f%% + %s", name, got, w, relTol*100, absTol))
	}
	if want > 0 {
		return diff / float64(w)
	}
	return 0
}

// indexStampBytes uploads the dataset in src and returns the size of the
// S3 server's ETag of its index.json: what stream stores beside the
// cached index (sim.Dataset.IndexStampBytes; sluice simulate learns it
// from the index's GET).
func indexStampBytes(t *testing.T, src string) int64 {
	t.Helper()
	s := uploadShaped(t, src, &sim.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := s.reg.Open(ctx, "shaped://validate")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	info, err := b.Stat(ctx, format.IndexFile)
	if err != nil {
		t.Fatal(err)
	}
	if info.ETag == "" {
		t.Fatalf("the S3 server gave %s no ETag", format.IndexFile)
	}
	return int64(len(info.ETag))
}

// validationDataset writes the validation's dataset into a temporary
// directory (13 shards of ~19 samples, ~77 KB each) and returns the
// directory, its parsed index and the index's bytes.
func validationDataset(t *testing.T) (dir string, idx *format.Index, data []byte) {
	t.Helper()
	dir = t.TempDir()
	writeMDS(t, dir, 240, 4000, 80_000)
	data, err := os.ReadFile(filepath.Join(dir, format.IndexFile))
	if err != nil {
		t.Fatal(err)
	}
	if idx, err = format.ParseIndex(data); err != nil {
		t.Fatal(err)
	}
	return dir, idx, data
}

// TestValidateAgainstS3 runs the real stream against the real S3 server
// behind a latency and bandwidth shaper with a fixed step time, and
// compares it with the simulation of the same run: bytes and requests
// exactly, time to first batch, input wait and wall time within the
// tolerance.
func TestValidateAgainstS3(t *testing.T) {
	src, idx, data := validationDataset(t)
	seed := int64(7)
	stamp := indexStampBytes(t, src)
	var foot int64
	for _, sh := range idx.Shards {
		foot = max(foot, sh.RawData.Bytes)
	}
	for _, tc := range []struct {
		name    string
		shuffle bool
		step    time.Duration
		conc    int
		wait    bool  // compare the input wait
		limit   int64 // cache limit
		workers int   // DataLoader workers, one iterator each (0: one rank iterator)
		// bytesOnly asserts the bytes alone: the timings are logged.
		bytesOnly bool
		// noFirst asserts the time to first batch against the mean of
		// the race of the burst it is in (burstRace), not the simulation.
		noFirst bool
		// ordered takes the workers' shard changes in turn
		// (stream.Options.OrderAdmissions).
		ordered bool
	}{
		// 77 KB at 1 MB/s is ~80 ms a shard. One prefetch at a time: the
		// first batch spans two shards, opened one after the other (~2 ×
		// (40 + 77) ms). Over the epoch the reader waits ~10-15% longer
		// than simulated; the wait is not asserted (docs/input-bound.md).
		{"first-batch", true, 70 * time.Millisecond, 1, false, 0, 0, false, false, false},
		// The default eight prefetches: once the first sample is out the
		// prefetcher sends up to eight requests at once, and the first
		// batch's second shard reaches the link somewhere among them (a
		// race; the model takes the mean). A 30 ms step over 10 samples
		// consumes a shard in ~60 ms: the reader stalls.
		{"stalls", true, 30 * time.Millisecond, 8, true, 0, 0, false, false, false},
		{"stalls-sequential", false, 25 * time.Millisecond, 8, true, 0, 0, false, false, false},
		// A cache of ~5 shards: the epoch evicts and downloads shards
		// again (each shard's samples are spread over the epoch). Bytes
		// and requests are exact (52-54 requests measured over runs
		// before prefetches were admitted in walk order and the walk
		// moved with the consumer's shard, not its sample).
		{"evicting", true, 30 * time.Millisecond, 8, true, 420_000, 0, false, false, false},
		// The same with two fetch slots, fewer than the budget's three
		// shards. Under a limit the slots bound the downloads, in the
		// walk's order, not the walk (stream's fetchSlots): when they
		// bounded the walk, what it admitted depended on how many
		// downloads had ended where the consumer moved (45 requests at
		// a 30 ms step, 47 at 80 ms; 46 against 45 once in CI at load
		// ~15). 47 requests, as with eight slots.
		{"evicting-2-slots", true, 30 * time.Millisecond, 2, true, 420_000, 0, false, false, false},
		// A limit of exactly the index and 5 shards: the index's ETag
		// stamp (index.json.etag, 34 bytes on S3, written beside the
		// index as it is cached) leaves room for 4 shards and a part of
		// a fifth, where the index alone would leave 5. 50 requests
		// measured against 47 simulated when the model counted the index
		// alone.
		{"evicting-stamp", true, 30 * time.Millisecond, 8, true, int64(len(data)) + 5*foot, 0, false, false, false},
		// The agent's shape: one iterator (and prefetcher) per DataLoader
		// worker, each over its own order, sharing the cache and the link,
		// each worker reading up to prefetch_factor (2) batches ahead of
		// the loop. At the start every worker requests its first sample's
		// shard and nothing else until that sample is out
		// (prefetch.FirstEnd), the workers' requests in their order on the
		// link (with 4 workers the real order is a race: the first batch
		// is measured up to ~80% late, inside the tolerance's 150 ms).
		{"workers", true, 30 * time.Millisecond, 2, true, 0, 2, false, false, false},
		{"workers-4", true, 30 * time.Millisecond, 2, true, 0, 4, false, false, false},
		// Under a cache of ~5 shards two workers get no prefetch budget
		// (prefetch.Budget): they read on demand, each on its own, ahead
		// of the loop.
		{"workers-evicting", true, 30 * time.Millisecond, 2, true, 420_000, 2, false, false, false},
		// The same with the workers' shard changes taken in turn in the
		// rank's order: what is evicted and fetched again no longer
		// depends on which download ends first.
		{"workers-evicting-ordered", true, 30 * time.Millisecond, 2, true, 420_000, 2, false, false, true},
		// A cache of ~7 shards leaves each of two workers a prefetch
		// budget of one shard: taking turns, a worker's walk runs in its
		// turns alone, its fetches admitted there (37 requests; 36-37
		// measured unordered, 41 simulated unordered).
		{"workers-evicting-ordered-prefetch", true, 30 * time.Millisecond, 2, true, 600_000, 2, false, false, true},
		// A cache of ~10 shards, a prefetch budget of three each: a fetch
		// refused for room counts against the walk's budget until the
		// worker reaches it, in stream's walk and the model alike (37
		// requests; 37 measured against 40 simulated when the model did
		// not count it). A worker's first turn waits for its plan past
		// the first batch (stream's planKnown): taken before, as the
		// mapping raced it, its walk fetched that batch's shards alone
		// (40 requests measured against 39 in 1-3 runs of 8 under -race).
		// The time to first batch is asserted against the race's mean,
		// not the simulation: the first batch's two shards are among the
		// (up to) seven requests both workers' first turns send at once
		// (each walk's three fetches ahead and worker 0's demand fetch),
		// in an order on the link that is a race, which the model takes
		// in the workers' order (269 ms simulated, the best case; 194-700
		// ms measured in 93 attempts of this row and the next, median 442
		// ms, 27 past the tolerance around 269 ms). burstRace gives the
		// mean for the burst each run sends (~450 ms for 7).
		{"workers-evicting-ordered-800k", true, 30 * time.Millisecond, 8, true, 800_000, 2, false, true, true},
		// The same with two fetch slots: taking turns, the slots do not
		// bound what a worker's walk admits in its turn (how many of its
		// downloads were still running there was timing: 35-36 measured
		// against 34 simulated before). The time to first batch is
		// asserted as in the row above.
		{"workers-evicting-ordered-2-slots", true, 30 * time.Millisecond, 2, true, 800_000, 2, false, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &sim.Config{
				Dataset:             validationSimDataset(idx, data, stamp),
				Plan:                plan.Options{BatchSize: 10, Shuffle: tc.shuffle, ShuffleAlgo: plan.AlgoPy1s, ShuffleSeed: &seed},
				Shape:               plan.Shape{Nodes: 1, RanksPerNode: 1, WorkersPerRank: max(tc.workers, 1)},
				RankIterator:        tc.workers == 0,
				Store:               sim.Store{Latency: 40 * time.Millisecond, BandwidthPerNode: 1e6},
				StepTime:            sim.Fixed(tc.step),
				PrefetchConcurrency: tc.conc,
				CacheLimit:          tc.limit,
				OrderAdmissions:     tc.ordered,
			}
			rep, err := sim.Run(context.Background(), c)
			if err != nil {
				t.Fatal(err)
			}
			// Bytes and requests are asserted on every run. The timings
			// are a race in part (which of eight simultaneous requests the
			// link serves first) and CI's cores are shared: a run whose
			// timings are off is repeated, up to three runs in all.
			var timing []string
			for attempt := range 3 {
				m := streamShaped(t, src, c)
				if m.samples != rep.Samples {
					t.Errorf("samples: measured %d, simulated %d", m.samples, rep.Samples)
				}
				// Exact, evicting or not, where one iterator reads the
				// node: what it fetches and evicts follows its plan and
				// the cache's state alone (the walk runs where the
				// consumer moves, the cache admits a prefetch when it is
				// asked, in that order).
				exact := tc.limit == 0 || tc.workers == 0 || tc.ordered
				if exact && (int64(m.requests) != rep.StoreRequests || m.bytes != rep.StoreBytes) {
					t.Errorf("store: measured %d requests, %d bytes; simulated %d, %d", m.requests, m.bytes, rep.StoreRequests, rep.StoreBytes)
				}
				if eb := math.Abs(float64(m.bytes-rep.StoreBytes)) / float64(rep.StoreBytes); !exact && eb > evictTol {
					// Several workers under evictions: their reads
					// interleave as their downloads end, a race in the
					// real system (docs/input-bound.md).
					t.Errorf("store under evictions: measured %d requests, %d bytes; simulated %d, %d: off by %.0f%%, more than %.0f%%",
						m.requests, m.bytes, rep.StoreRequests, rep.StoreBytes, 100*eb, 100*evictTol)
				}
				if tc.workers > 0 && !tc.ordered {
					// (Taking turns, a worker's first fetch waits for the
					// shard changes before it in the rank's order, which
					// may wait for the first shard: the simulated time to
					// first batch covers it.)
					checkStart(t, idx, c, m)
				}
				timing = timing[:0]
				e1 := math.NaN()
				if tc.noFirst {
					// The first batch's shards are in a burst whose order
					// on the link is a race: its mean, measured from this
					// run's burst (burstRace), within the tolerance.
					want, lo, hi, k, need, ok := burstRace(t, idx, c, m)
					if !ok {
						timing = append(timing, fmt.Sprintf("the first batch's %d shards are not all in the burst of %d requests at the start", need, k))
					} else {
						e1 = within(&timing, "time to first batch (the burst's race)", m.firstBatch, want.Seconds())
						t.Logf("first batch %s: %d of a burst of %d, expected %s (best %s, worst %s); simulated %.3fs (the workers' order)",
							m.firstBatch, need, k, want, lo, hi, rep.TimeToFirstBatchS)
					}
				} else {
					e1 = within(&timing, "time to first batch", m.firstBatch, rep.TimeToFirstBatchS)
				}
				e3 := within(&timing, "wall", m.elapsed, rep.WallS)
				e2 := math.NaN()
				if tc.wait {
					e2 = within(&timing, "input wait", m.wait, rep.TimeToFirstBatchS+rep.StallS)
				}
				if tc.bytesOnly {
					timing = timing[:0]
				}
				for _, tm := range m.timings {
					if tm.Arrived.Sub(m.start) > m.firstBatch {
						break // the requests before the first batch
					}
					t.Logf("  %s %s arrived %+.1fms linked %+.1fms ended %+.1fms", tm.Method, tm.Path,
						ms(tm.Arrived.Sub(m.start)), ms(tm.Linked.Sub(m.start)), ms(tm.Ended.Sub(m.start)))
				}
				t.Logf("run %d: first batch %s vs %.3fs (%.0f%% off), wait %s vs %.3fs (%.0f%% off; %d stalled steps simulated), wall %s vs %.3fs (%.0f%% off); %d requests, %d bytes (simulated %d, %d)",
					attempt+1, m.firstBatch, rep.TimeToFirstBatchS, 100*e1, m.wait, rep.TimeToFirstBatchS+rep.StallS, 100*e2, rep.StalledSteps,
					m.elapsed, rep.WallS, 100*e3, m.requests, m.bytes, rep.StoreRequests, rep.StoreBytes)
				if len(timing) == 0 || t.Failed() {
					break
				}
			}
			for _, e := range timing {
				t.Error(e)
			}
		})
	}
}

// validationSimDataset is the model's dataset of the validation's index
// (data, parsed as idx) cached from S3 with its ETag stamp.
func validationSimDataset(idx *format.Index, data []byte, stamp int64) sim.Dataset {
	d := sim.DatasetFromIndex(idx, int64(len(data)), false)
	d.IndexStampBytes = stamp
	return d
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// checkStart checks the shard requests of a run with DataLoader workers
// that reached the store before any response could be back (within the
// store's latency of the first shard request): exactly the
// workers' first shards, each once (the planner's worker orders), and not a
// worker's next shard (before prefetch.FirstEnd a worker whose reader
// waited for its first shard had its prefetcher fetch the next one too,
// or not, as the goroutines raced: 3-4 requests for 2 workers).
func checkStart(t *testing.T, idx *format.Index, c *sim.Config, m measured) {
	t.Helper()
	byName := map[string]int{}
	for i, sh := range idx.Shards {
		byName[sh.RawData.Basename] = i
	}
	want := map[int]bool{}
	for _, shards := range workerShards(t, idx, c, 1) {
		for _, sh := range shards {
			want[sh] = true
		}
	}
	var bound time.Time
	for _, tm := range m.timings {
		if _, ok := byName[filepath.Base(tm.Path)]; ok {
			bound = tm.Arrived.Add(c.Store.Latency)
			break
		}
	}
	got := map[int]int{}
	for _, tm := range m.timings {
		if sh, ok := byName[filepath.Base(tm.Path)]; ok && tm.Arrived.Before(bound) {
			got[sh]++
		}
	}
	ok := len(got) == len(want)
	for sh, n := range got {
		ok = ok && want[sh] && n == 1
	}
	if !ok {
		t.Errorf("shard requests before any shard could be there: %v (shard: requests), want the workers' first shards %v once each", got, want)
	}
}
