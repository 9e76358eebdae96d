package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/internal/atomicfile"
	"github.com/sluicedata/sluice/metrics"
	"github.com/sluicedata/sluice/plan"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/retry"
	"github.com/sluicedata/sluice/stream"
)

// streamFlags are the flags of `sluice stream`, named after MosaicML's
// StreamingDataset arguments where one exists.
type streamFlags struct {
	local, split                    string
	shuffle                         bool
	shuffleAlgo                     string
	shuffleSeed                     int64
	shuffleBlockSize                int64
	numCanonicalNodes               int
	batchSize                       int
	partitionAlgo, samplingMethod   string
	samplingGranularity             int64
	batchingMethod, epochSize       string
	predownload                     int
	cacheLimit                      string
	downloadRetry                   int
	downloadTimeout                 time.Duration
	validateHash                    string
	keepZip                         bool
	workers                         int
	rank, worldSize, localWorldSize int
	nodes, ranksPerNode             int // canonical world flags (see flags.go)
	stepTime                        time.Duration
	resume, saveState               string
	saveEvery                       int64
	retryAttempts                   int
	retryBackoff, retryMaxBackoff   time.Duration
	throttleBackoff                 time.Duration
	stallTimeout                    time.Duration
	cacheGroup                      bool
	limit                           int64
	asJSON, decode                  bool
	progress                        string
	progressInterval                time.Duration
	noIndex                         bool
}

func newStreamCommand(e *env) *cobra.Command {
	var f streamFlags
	cmd := &cobra.Command{
		Use:   "stream URL",
		Short: "Stream a dataset as one rank would and report figures",
		Long: `Stream a dataset as one training rank would: open it (any storage URL, with
--local as the node cache directory, or a local directory alone), plan the
epoch exactly as MosaicML Streaming does, read this rank's samples in
DataLoader order through the bounded cache with planned prefetch, and print
the figures: time to first sample, samples/s, MB/s, cache hits and misses,
bytes fetched, time waiting for data and, with --step-time, the fraction of a
training loop's time it would spend waiting for input.

The rank comes from --rank/--nodes/--ranks-per-node, else from RANK,
WORLD_SIZE and LOCAL_WORLD_SIZE (torchrun) or Slurm's variables. --resume
continues from a saved state (MosaicML's state_dict JSON, from Sluice or
Python), also on another world size; --save-state writes the state
atomically every --save-every samples and when the run ends (also on an
error), so a stopped or killed run can be resumed as a trainer's would.

A local directory streamed without --local is read in place; when its shards
are compressed they are decompressed into a cache under the system temp
directory, never beside the originals. Every store is read through the retry
decorator (--retry-* and --stall-timeout; --download-timeout bounds each
attempt's wait for a response).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkStreamCounts(cmd, &f); err != nil {
				return err
			}
			if f.noIndex {
				return runTarSequence(cmd.Context(), e, &f, args[0])
			}
			return runStream(cmd.Context(), e, cmd, &f, args[0])
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.local, "local", "", "local cache directory (default: read URL in place if it is a directory)")
	fl.StringVar(&f.split, "split", "", "split subdirectory")
	fl.BoolVar(&f.shuffle, "shuffle", false, "shuffle the samples")
	fl.StringVar(&f.shuffleAlgo, "shuffle-algo", plan.AlgoPy1e, shuffleAlgoHelp)
	fl.Int64Var(&f.shuffleSeed, "shuffle-seed", plan.DefaultShuffleSeed, "shuffle seed")
	fl.Int64Var(&f.shuffleBlockSize, "shuffle-block-size", 0, "shuffle block size (0: max(4000000/NCN, 262144))")
	fl.IntVar(&f.numCanonicalNodes, "num-canonical-nodes", 0, "canonical nodes (0: MosaicML's default)")
	fl.IntVar(&f.batchSize, "batch-size", 32, "per-device batch size")
	fl.StringVar(&f.partitionAlgo, "partition-algo", plan.PartitionRelaxed, "partition algorithm: orig or relaxed")
	fl.StringVar(&f.samplingMethod, "sampling-method", plan.SamplingBalanced, "sampling method: balanced or fixed")
	fl.Int64Var(&f.samplingGranularity, "sampling-granularity", 1, "sampling granularity")
	fl.StringVar(&f.batchingMethod, "batching-method", plan.BatchingRandom, "batching method: random, stratified, per_stream or device_per_stream")
	fl.StringVar(&f.epochSize, "epoch-size", "", `samples per epoch ("100k", "1.5m"; default: all)`)
	fl.IntVar(&f.predownload, "predownload", 0, "samples to prefetch ahead (0: 8×batch size)")
	fl.StringVar(&f.cacheLimit, "cache-limit", "", `cache size limit ("10gb"; default: none)`)
	fl.IntVar(&f.downloadRetry, "download-retry", 2, "download attempts per file")
	fl.DurationVar(&f.downloadTimeout, "download-timeout", time.Minute, "timeout of one download attempt")
	fl.StringVar(&f.validateHash, "validate-hash", "", validateHashHelp())
	fl.BoolVar(&f.keepZip, "keep-zip", false, "keep compressed shards after decompressing")
	fl.IntVar(&f.workers, "workers-per-rank", 1, "DataLoader workers per rank")
	fl.IntVar(&f.rank, "rank", -1, "global rank (default: $RANK or Slurm, else 0)")
	fl.IntVar(&f.nodes, "nodes", 0, "physical nodes (default: $WORLD_SIZE/$LOCAL_WORLD_SIZE or Slurm, else 1)")
	fl.IntVar(&f.ranksPerNode, "ranks-per-node", 0, "ranks (devices) per node (default: $LOCAL_WORLD_SIZE, else 1)")
	// Deprecated names of the same settings, hidden (see flags.go).
	fl.IntVar(&f.workers, "workers", 1, "DataLoader workers per rank (deprecated: use --workers-per-rank)")
	fl.IntVar(&f.worldSize, "world-size", 0, "number of ranks (deprecated: use --nodes and --ranks-per-node)")
	fl.IntVar(&f.localWorldSize, "local-world-size", 0, "ranks per node (deprecated: use --ranks-per-node)")
	for _, n := range []string{"workers", "world-size", "local-world-size"} {
		_ = fl.MarkHidden(n)
	}
	fl.DurationVar(&f.stepTime, "step-time", 0, "simulated compute time per batch (e.g. 20ms)")
	fl.StringVar(&f.resume, "resume", "", "resume from this state JSON file")
	fl.StringVar(&f.saveState, "save-state", "", "write the state JSON here (atomically) every --save-every samples and at the end")
	fl.Int64Var(&f.saveEvery, "save-every", 1000, "samples between state saves with --save-state (0: only at the end)")
	fl.IntVar(&f.retryAttempts, "retry-attempts", 10, "consecutive failed attempts per request before giving up")
	fl.DurationVar(&f.retryBackoff, "retry-backoff", 100*time.Millisecond, "wait after the first failure (doubles, with jitter)")
	fl.DurationVar(&f.retryMaxBackoff, "retry-max-backoff", 20*time.Second, "longest wait between attempts")
	fl.DurationVar(&f.throttleBackoff, "retry-throttle-backoff", time.Second, "least wait after the store throttled (503 SlowDown, 429)")
	fl.DurationVar(&f.stallTimeout, "stall-timeout", 30*time.Second, "resume a download that receives nothing for this long")
	fl.BoolVar(&f.cacheGroup, "cache-group", false, "make the cache usable by its directory's group (default: owner only)")
	fl.Int64Var(&f.limit, "limit", 0, "stop after this many samples (0: the whole epoch)")
	fl.BoolVar(&f.asJSON, "json", false, "print the figures as JSON")
	fl.StringVar(&f.progress, "progress", "auto", "progress on stderr (none with --json): "+progressValues)
	fl.DurationVar(&f.progressInterval, "progress-interval", 2*time.Second, "time between plain progress lines")
	_ = fl.MarkHidden("progress-interval")
	fl.BoolVar(&f.decode, "decode", false, "decode every sample (default: read the raw records)")
	fl.BoolVar(&f.noIndex, "no-index", false, noIndexHelp)
	return cmd
}

// streamWorld resolves the rank's world from flags, then the environment.
func streamWorld(f *streamFlags) (plan.World, error) {
	w, err := stream.WorldFromEnv(os.Getenv)
	if err != nil {
		return w, err
	}
	if f.worldSize > 0 {
		w.Nodes, w.RanksPerNode = f.worldSize, 1
		if f.localWorldSize > 0 {
			if f.worldSize%f.localWorldSize != 0 {
				return w, fmt.Errorf("stream: --world-size %d is not a multiple of --local-world-size %d", f.worldSize, f.localWorldSize)
			}
			w.Nodes, w.RanksPerNode = f.worldSize/f.localWorldSize, f.localWorldSize
		}
	}
	if f.nodes > 0 || f.ranksPerNode > 0 {
		if f.ranksPerNode > 0 {
			w.RanksPerNode = f.ranksPerNode
		}
		if f.nodes > 0 {
			w.Nodes = f.nodes
		}
	}
	if f.rank >= 0 {
		w.Rank = f.rank
	}
	return w, w.Validate()
}

// streamReport is what `sluice stream --json` prints.
type streamReport struct {
	Rank          int     `json:"rank"`
	WorldSize     int     `json:"world_size"`
	Epoch         int64   `json:"epoch"`
	SampleInEpoch int64   `json:"sample_in_epoch_at_start"`
	Samples       int64   `json:"samples"`
	Bytes         int64   `json:"bytes"`
	ElapsedS      float64 `json:"elapsed_s"`
	SamplesPerS   float64 `json:"samples_per_s"`
	MBPerS        float64 `json:"mb_per_s"`
	FirstSampleS  float64 `json:"time_to_first_sample_s"`
	WaitS         float64 `json:"wait_s"`
	// InputWaitS (with --step-time) is the time the loop waited for its
	// batches: from the end of each step to the next batch's last
	// sample. InputWaitFraction is that over itself plus the steps.
	InputWaitS        *float64     `json:"input_wait_s,omitempty"`
	InputWaitFraction *float64     `json:"input_wait_fraction,omitempty"`
	Hits              int64        `json:"cache_hits"`
	Misses            int64        `json:"cache_misses"`
	Downloads         int64        `json:"downloads"`
	BytesFetched      int64        `json:"bytes_fetched"`
	Evictions         int64        `json:"evictions"`
	StoreRetries      int64        `json:"store_retries"`
	RetriesBy         []retryCount `json:"retries_by,omitempty"`
	// Store is the run's requests to the store per operation (each
	// attempt of a retried request counts; latency is the time to the
	// first byte or answer, summed).
	Store []storeOp       `json:"store,omitempty"`
	State json.RawMessage `json:"state"`
}

// storeOp is one operation's store requests in the report.
type storeOp struct {
	Op       string  `json:"op"`
	Requests int64   `json:"requests"`
	Errors   int64   `json:"errors"`
	Seconds  float64 `json:"latency_s"`
}

func runStream(ctx context.Context, e *env, cmd *cobra.Command, f *streamFlags, url string) error {
	mode, err := parseProgress(f.progress)
	if err != nil {
		return fmt.Errorf("stream: %w", err)
	}
	if f.asJSON {
		mode = "none"
	}
	mode = mode.resolve(e.stderr)
	var retries retry.Counts // every store retry of the run, for the report
	opts := &stream.Options{
		Split: f.split, Registry: e.registry, Shuffle: f.shuffle, ShuffleAlgo: f.shuffleAlgo,
		ShuffleBlockSize: f.shuffleBlockSize, NumCanonicalNodes: f.numCanonicalNodes,
		BatchSize: f.batchSize, PartitionAlgo: f.partitionAlgo, SamplingMethod: f.samplingMethod,
		SamplingGranularity: f.samplingGranularity, BatchingMethod: f.batchingMethod,
		Predownload: f.predownload, DownloadRetry: f.downloadRetry, DownloadTimeout: f.downloadTimeout,
		ValidateHash: f.validateHash, KeepZip: f.keepZip,
		Retry: retries.Hook(&retry.Options{MaxAttempts: f.retryAttempts, InitialBackoff: f.retryBackoff,
			MaxBackoff: f.retryMaxBackoff, ThrottleBackoff: f.throttleBackoff, StallTimeout: f.stallTimeout}),
		CacheSharedGroup: f.cacheGroup,
	}
	// Every store request of the run, each attempt timed (the report's
	// store figures).
	storeTimes := metrics.NewStore()
	opts.StoreInner = func(b storage.Bucket) storage.Bucket { return storeTimes.Bucket("", b) }
	if f.retryAttempts < 1 {
		return fmt.Errorf("stream: --retry-attempts %d must be at least 1", f.retryAttempts)
	}
	seed := f.shuffleSeed
	opts.ShuffleSeed = &seed
	if f.local == "" {
		if strings.Contains(url, "://") && !strings.HasPrefix(url, "file://") {
			return errors.New("stream: --local is required for a remote URL")
		}
		dir := strings.TrimPrefix(url, "file://")
		compressed, err := localCompressed(dir, f.split)
		if err != nil {
			return err
		}
		if compressed {
			// Decompressed copies go to a cache, never into the source.
			opts.Remote = dir
		} else {
			opts.Local = dir
		}
	} else {
		opts.Remote, opts.Local = url, f.local
	}
	if f.epochSize != "" {
		n, err := stream.ParseEpochSize(f.epochSize)
		if err != nil {
			return fmt.Errorf("stream: --epoch-size: %w", err)
		}
		opts.EpochSize = n
	}
	if f.cacheLimit != "" {
		n, err := stream.ParseBytes(f.cacheLimit)
		if err != nil {
			return fmt.Errorf("stream: --cache-limit: %w", err)
		}
		opts.CacheLimit = n
	}
	w, err := streamWorld(f)
	if err != nil {
		return err
	}
	ds, err := stream.Open(ctx, opts)
	if err != nil {
		return err
	}
	defer ds.Close()
	for _, w := range ds.OpenWarnings() {
		fmt.Fprintf(e.stderr, "sluice stream: warning: %s\n", w)
	}
	if f.resume != "" {
		b, err := os.ReadFile(f.resume)
		if err != nil {
			return fmt.Errorf("stream: --resume: %w", err)
		}
		st, err := plan.ParseState(b)
		if err != nil {
			return fmt.Errorf("stream: --resume %s: %w", f.resume, err)
		}
		if err := ds.Load(st); err != nil {
			return err
		}
	}
	ep, err := ds.NewEpoch(ctx, w, f.workers)
	if err != nil {
		return err
	}
	it, err := ep.RankIter(ctx)
	if err != nil {
		return err
	}
	defer it.Close()

	total := int64(it.Len())
	if f.limit > 0 && f.limit < total {
		total = f.limit
	}
	var bar *mpb.Bar
	var progress *mpb.Progress
	var line *throttledLine
	switch mode {
	case "plain":
		line = newThrottledLine(e.stderr, "stream")
		line.interval = f.progressInterval
	case "bar":
		progress = mpb.NewWithContext(ctx, mpb.WithOutput(e.stderr), mpb.WithWidth(40))
		bar = progress.AddBar(total,
			mpb.PrependDecorators(decor.Name("rank "+fmt.Sprint(w.Rank)+" "), decor.CountersNoUnit("%d / %d")),
			mpb.AppendDecorators(decor.Percentage(), decor.Name(" "), decor.EwmaSpeed(0, "%.0f samples/s", 30)))
	}
	batch := max(f.batchSize, 1)
	var n int64
	loopStart := time.Now()
	// With --step-time the loop times its own wait for each batch: from
	// the end of the previous step to the batch's last sample (the
	// stream's wait for shards, and whatever else a read costs: a cache
	// under a limit making room, a shard's file work, decoding).
	var inputWait time.Duration
	var steps int64
	batchStart := loopStart
	// The state is saved every --save-every samples and whatever way the
	// run ends, so that a killed run resumes like a trainer's checkpoint.
	saved := int64(-1)
	save := func() error {
		if f.saveState == "" || n == saved {
			return nil
		}
		st, err := ds.State(n)
		if err != nil {
			return err
		}
		b, _ := st.MarshalJSON()
		if err := atomicfile.WriteFile(f.saveState, 0o600, b); err != nil {
			return fmt.Errorf("stream: --save-state: %w", err)
		}
		saved = n
		return nil
	}
	defer func() {
		if err := save(); err != nil {
			fmt.Fprintf(e.stderr, "sluice stream: %v\n", err)
		}
	}()
	for (f.limit <= 0 || n < f.limit) && it.Next() {
		if f.decode {
			if _, err := it.Sample(); err != nil {
				it.Close()
				return err
			}
		}
		n++
		if f.saveEvery > 0 && n%f.saveEvery == 0 {
			if err := save(); err != nil {
				return err
			}
		}
		if bar != nil && n%256 == 0 {
			bar.SetCurrent(n)
		}
		if line != nil && n%256 == 0 {
			line.update(streamProgressText(n, total, time.Since(loopStart), it.Stats(), ds.Stats()))
		}
		if f.stepTime > 0 && n%int64(batch) == 0 {
			inputWait += time.Since(batchStart)
			steps++
			if err := streamSleep(ctx, f.stepTime); err != nil {
				return err
			}
			batchStart = time.Now()
		}
	}
	if f.stepTime > 0 && n%int64(batch) != 0 {
		// The last, partial batch.
		inputWait += time.Since(batchStart)
		steps++
	}
	if bar != nil {
		bar.SetCurrent(n)
		bar.Abort(false)
		progress.Wait()
	}
	if line != nil {
		line.finish(streamProgressText(n, total, time.Since(loopStart), it.Stats(), ds.Stats()))
	}
	if err := it.Err(); err != nil {
		return err
	}
	st, err := ds.State(n)
	if err != nil {
		return err
	}
	stateJSON, _ := st.MarshalJSON()
	if err := save(); err != nil {
		return err
	}
	s := it.Stats()
	cs := ds.Stats()
	warnAmplification(e.stderr, ds, cs.BytesFetched, opts.CacheLimit)
	r := streamReport{
		Rank: w.Rank, WorldSize: w.NumRanks(), Epoch: ep.Number(), SampleInEpoch: ep.SampleInEpoch(),
		Samples: s.Samples, Bytes: s.Bytes, ElapsedS: s.Elapsed.Seconds(),
		SamplesPerS: s.SamplesPerSecond(), MBPerS: s.BytesPerSecond() / 1e6,
		FirstSampleS: s.FirstSample.Seconds(), WaitS: s.Wait.Seconds(),
		Hits: s.Hits, Misses: s.Misses, Downloads: cs.Downloads, BytesFetched: cs.BytesFetched,
		Evictions: cs.Evictions, State: stateJSON, StoreRetries: retries.Total(),
	}
	for _, rc := range retries.Snapshot() {
		r.RetriesBy = append(r.RetriesBy, retryCount{Op: rc.Op, Cause: rc.Cause, N: rc.N})
	}
	for _, t := range storeTimes.Totals("") {
		r.Store = append(r.Store, storeOp{Op: t.Op, Requests: t.Requests, Errors: t.Errors, Seconds: t.Seconds})
	}
	if f.stepTime > 0 {
		v := 0.0
		if total := inputWait + time.Duration(steps)*f.stepTime; total > 0 {
			v = float64(inputWait) / float64(total)
		}
		r.InputWaitFraction = &v
		w := inputWait.Seconds()
		r.InputWaitS = &w
	}
	if f.asJSON {
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(e.stdout, "%s\n", b)
		return err
	}
	printStreamReport(e.stdout, &r, f)
	return nil
}

// retryCount is one operation's retries for one cause in the report.
type retryCount struct {
	Op    string `json:"op"`
	Cause string `json:"cause"`
	N     int64  `json:"n"`
}

func printStreamReport(w io.Writer, r *streamReport, f *streamFlags) {
	fmt.Fprintf(w, "rank %d of %d, epoch %d (from sample %d of the epoch)\n", r.Rank, r.WorldSize, r.Epoch, r.SampleInEpoch)
	fmt.Fprintf(w, "streamed %d samples (%.1f MB) in %.3fs: %.0f samples/s, %.1f MB/s\n",
		r.Samples, float64(r.Bytes)/1e6, r.ElapsedS, r.SamplesPerS, r.MBPerS)
	fmt.Fprintf(w, "time to first sample %.1f ms; waited %.3fs for data", r.FirstSampleS*1e3, r.WaitS)
	if r.InputWaitFraction != nil && r.InputWaitS != nil {
		fmt.Fprintf(w, "; the loop waited %.3fs for its batches (input wait %.1f%% of a loop at %s per step)", *r.InputWaitS, *r.InputWaitFraction*100, f.stepTime)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "cache: %d hits, %d misses, %d downloads (%.1f MB fetched), %d evictions\n",
		r.Hits, r.Misses, r.Downloads, float64(r.BytesFetched)/1e6, r.Evictions)
	for _, so := range r.Store {
		fmt.Fprintf(w, "store %s: %d requests (%d failed), mean latency %.1f ms\n", so.Op, so.Requests, so.Errors, 1e3*so.Seconds/float64(max(so.Requests, 1)))
	}
	if r.StoreRetries > 0 {
		fmt.Fprintf(w, "store retries: %d", r.StoreRetries)
		for _, rc := range r.RetriesBy {
			fmt.Fprintf(w, " (%s %s: %d)", rc.Op, rc.Cause, rc.N)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "state: %s\n", r.State)
	if f.saveState != "" {
		fmt.Fprintf(w, "state saved to %s\n", f.saveState)
	}
}

// streamProgressText is one plain progress line of `sluice stream`: it
// counts the iterator's samples, bytes and cache hits, and the dataset's
// downloads (ds).
func streamProgressText(n, total int64, elapsed time.Duration, it, ds stream.Stats) string {
	rate := 0.0
	if elapsed > 0 {
		rate = float64(n) / elapsed.Seconds()
	}
	return fmt.Sprintf("%d / %d samples, %.0f samples/s, %s; cache: %d hits, %d misses, %d downloads (%s fetched)",
		n, total, rate, humanBytes(it.Bytes), it.Hits, it.Misses, ds.Downloads, humanBytes(ds.BytesFetched))
}

func streamSleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// localCompressed reports whether the local dataset in dir (split) has
// compressed shards, which reading would otherwise decompress beside the
// originals. A directory without an index is left to stream.Open to
// report.
func localCompressed(dir, split string) (bool, error) {
	p := filepath.Join(dir, filepath.FromSlash(split), format.IndexFile)
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		// No index, or dir is a file (a local .tar shard): stream.Open
		// decides what it is.
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("stream: %w", err)
	}
	idx, err := format.ParseIndex(b)
	if err != nil {
		return false, nil // stream.Open reports it, with its name
	}
	for i := range idx.Shards {
		if idx.Shards[i].ZipData != nil || idx.Shards[i].ZipMeta != nil {
			return true, nil
		}
	}
	return false, nil
}

// amplification is the multiple of the data needed above which a run
// under a cache limit is told that the limit makes it re-download.
const amplification = 3

// warnAmplification warns once, when downloads under a cache limit came
// to more than amplification times the dataset's size: the limit is too
// tight for the access pattern (py1e over a whole dataset, say).
func warnAmplification(w io.Writer, ds *stream.Dataset, fetched, limit int64) {
	if limit <= 0 || fetched <= 0 {
		return
	}
	var need, foot int64
	for k := range ds.NumShards() {
		si := ds.ShardInfo(k)
		var z, r int64
		for _, fi := range si.Files() {
			z += fi.Bytes
		}
		r = si.RawData.Bytes
		if si.RawMeta != nil {
			r += si.RawMeta.Bytes
		}
		need += z
		foot += max(z, r)
		if si.ZipData != nil {
			foot += z
		}
	}
	if need <= 0 || fetched <= amplification*need {
		return
	}
	fmt.Fprintf(w, "sluice stream: warning: downloaded %s, %.1f× the dataset's %s: the cache limit %s is too small for this order (a limit of %s holds the whole dataset and downloads each shard once)\n",
		humanBytes(fetched), float64(fetched)/float64(need), humanBytes(need), humanBytes(limit), humanBytes(foot))
}
