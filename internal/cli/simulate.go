package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/internal/atomicfile"
	"github.com/sluicedata/sluice/plan"
	"github.com/sluicedata/sluice/sim"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/stream"
)

// simulateFlags are the flags of `sluice simulate`: plan's, the cache's
// and the store and node model.
type simulateFlags struct {
	streams                  []string
	shuffle                  bool
	shuffleAlgo              string
	shuffleSeed              int64
	shuffleBlockSize         int64
	numCanonicalNodes        int
	batchSize                int
	nodes, ranks, workers    int
	epochs                   int
	predownload, concurrency int
	prefetchFactor           int
	cacheLimit               string
	keepZip                  bool
	shardSizes               string
	shards                   int
	samples, sampleBytes     string
	stepTime                 string
	latency, decodeCost      time.Duration
	workerStart              time.Duration
	bwNode, bwTotal          string
	rankIterator             bool
	orderAdmissions          bool
	vary                     string
	searchLimit              bool
	asJSON                   bool
	stepsCSV                 string
	partitionAlgo            string
	epochSize                string
	maxMemory                string
	plotDir, plotFormat      string
	store                    storeFlags
}

func newSimulateCommand(e *env) *cobra.Command {
	var f simulateFlags
	cmd := &cobra.Command{
		Use:   "simulate [DATASET_OR_INDEX]",
		Short: "Simulate a training run's input pipeline: stalls, downloads, cache use",
		Long: `Simulate a run on a virtual clock: the epoch plan Sluice would compute (the
real planner), consumed step by step on every node, with the cache's own
eviction policy (Belady by the plan's next use, LRU for unplanned shards) and
the stream's own prefetch walk (window, budget, concurrency) deciding, over a
model of the store (latency per request, bandwidth per node and in all, as a
FIFO link per node) and of the consumers (each rank reads its part of a step
in order). What is and is not modelled, and the measured error against the
real stream over S3: docs/input-bound.md.

Reports, per node and in all: time to first batch, the steps that stall and for
how long, the input-wait fraction, throughput, bytes and requests to the store
and peak cache use; --search-min-cache finds the smallest cache limit with no
stall (on node 0) that the agent accepts (with --rank-iterator, the model's);
--vary KEY=V1,V2,... compares settings side by side (keys: cache_limit,
shuffle_algo, shuffle_block_size, predownload, nodes, batch_size,
workers_per_rank, prefetch_factor, step_time (normal:A,B and uniform:A,B
included), bandwidth_per_node, bandwidth_total, latency, num_canonical_nodes);
--plot DIR draws sluice plot's charts of the settings (throughput, input wait
per step and its distribution) from CSV files in sluice bench's columns.

The dataset is a directory or URL holding index.json, an index.json file, or
WebDataset tars (a brace pattern, "::" list or .tar URL, or a directory of
tars without index.json), as sluice plan takes it; --stream PATH[,proportion=P]
[,repeat=R][,choose=N], repeated, mixes several as MosaicML's streams do; without
one, --shard-sizes or --shards/--samples with --sample-bytes describe it. A simulation estimated
to need more memory than --max-memory, or a cache limit no real reader
accepts, is refused before it starts. --rank-iterator models sluice stream (one iterator per rank) instead of
the agent (one per DataLoader worker); --prefetch-factor is the DataLoader's
prefetch_factor (batches a worker may read ahead of the training loop).`,
		Args: cobra.MaximumNArgs(1),
		RunE: storeRunE(&f.store, func(cmd *cobra.Command, args []string) error {
			return runSimulate(cmd.Context(), e, &f, args)
		}),
	}
	addStoreFlags(cmd, &f.store)
	fl := cmd.Flags()
	fl.BoolVar(&f.shuffle, "shuffle", false, "shuffle the samples")
	fl.StringVar(&f.shuffleAlgo, "shuffle-algo", plan.AlgoPy1e, "shuffle algorithm: naive, py1s, py2s, py1br, py1e or py1b")
	fl.Int64Var(&f.shuffleSeed, "shuffle-seed", plan.DefaultShuffleSeed, "shuffle seed")
	fl.Int64Var(&f.shuffleBlockSize, "shuffle-block-size", 0, "shuffle block size (0: max(4000000/NCN, 262144))")
	fl.IntVar(&f.numCanonicalNodes, "num-canonical-nodes", 0, "canonical nodes (0: MosaicML's default)")
	fl.StringVar(&f.partitionAlgo, "partition-algo", "relaxed", "partition algorithm: orig or relaxed")
	fl.StringVar(&f.epochSize, "epoch-size", "", `samples per epoch ("100k", "1.5m"; default: all)`)
	fl.IntVar(&f.batchSize, "batch-size", 0, "per-device batch size (required)")
	fl.IntVar(&f.nodes, "nodes", 1, "physical nodes")
	fl.IntVar(&f.ranks, "ranks-per-node", 1, "ranks (devices) per node")
	fl.IntVar(&f.workers, "workers-per-rank", 1, "DataLoader workers per rank")
	fl.IntVar(&f.epochs, "epochs", 1, "epochs to play (the cache is kept between them)")
	fl.IntVar(&f.predownload, "predownload", 0, "samples each consumer prefetches ahead (0: stream's default, the larger of 8×batch size and the prefetch concurrency × the average shard)")
	fl.IntVar(&f.concurrency, "prefetch-concurrency", 0, "concurrent prefetches per consumer (0: 8)")
	fl.IntVar(&f.prefetchFactor, "prefetch-factor", 0, "batches each DataLoader worker may read ahead of the training loop, as torch's prefetch_factor (0: 2, its default; unused with --rank-iterator)")
	fl.StringVar(&f.cacheLimit, "cache-limit", "", `cache limit per node ("200gb"; 0 or none: no limit, the default); one below what the real cache accepts for the run (the index plus every consumer's leased shards and one being fetched) is refused, as the real cache refuses it`)
	fl.BoolVar(&f.keepZip, "keep-zip", false, "keep compressed shards in the cache after decompressing")
	fl.StringVar(&f.shardSizes, "shard-sizes", "", "comma-separated shard sample counts (instead of a dataset)")
	fl.StringArrayVar(&f.streams, "stream", nil, "a stream PATH[,proportion=P][,repeat=R][,choose=N] of a mixed dataset, as sluice plan takes it (repeatable; instead of a dataset)")
	fl.IntVar(&f.shards, "shards", 0, "number of equal shards (with --samples, instead of a dataset)")
	fl.StringVar(&f.samples, "samples", "", `total samples over --shards ("5m")`)
	fl.StringVar(&f.sampleBytes, "sample-bytes", "1kb", "bytes per sample without a dataset")
	fl.StringVar(&f.stepTime, "step-time", "0s", `compute time per step: "500ms", "normal:500ms,50ms" or "uniform:400ms,600ms"`)
	fl.DurationVar(&f.latency, "latency", 0, "store latency per request (time to first byte)")
	fl.StringVar(&f.bwNode, "bandwidth-per-node", "", `download rate of one node in bytes/s ("1.25gb"; default or none: unlimited)`)
	fl.StringVar(&f.bwTotal, "bandwidth-total", "", `download rate of the store for all nodes in bytes/s (default or none: unlimited)`)
	fl.DurationVar(&f.decodeCost, "decode-cost", 0, "CPU time per sample in a DataLoader worker")
	fl.DurationVar(&f.workerStart, "worker-start", 40*time.Millisecond, "time from the training loop's start until each DataLoader worker sends its first request, every epoch (the Python client's process start and agent handshake; 30-45 ms measured at load ~4, more on a loaded machine; unused with --rank-iterator)")
	fl.BoolVar(&f.rankIterator, "rank-iterator", false, "model sluice stream (one iterator per rank) instead of the agent")
	fl.BoolVar(&f.orderAdmissions, "order-admissions", false, "model stream's OrderAdmissions (StreamingDataset(order_admissions=True)): under a cache limit a rank's DataLoader workers take their shard changes in turn, in an order the plan sets (downloads then exact)")
	fl.StringVar(&f.vary, "vary", "", fmt.Sprintf("compare settings: KEY=V1,V2,... (at most %d values)", simMaxVary))
	fl.BoolVar(&f.searchLimit, "search-min-cache", false, "search the smallest cache limit with no stall (on node 0)")
	fl.BoolVar(&f.asJSON, "json", false, "print the reports as JSON")
	fl.StringVar(&f.stepsCSV, "steps-csv", "", "write every step's input wait per node to this CSV file")
	fl.StringVar(&f.plotDir, "plot", "", "write summary.csv and steps.csv (sluice bench's columns, one configuration per --vary setting) to this directory and draw sluice plot's charts there")
	fl.StringVar(&f.plotFormat, "plot-format", "png", "chart format with --plot: png or svg")
	fl.StringVar(&f.maxMemory, "max-memory", simDefaultMaxMemory, "refuse a simulation estimated to take more memory than this (about 160 bytes per sample, plus per node, shard and worker)")
	return cmd
}

// simulateRun is one setting's outcome (`sluice simulate --json`).
type simulateRun struct {
	Setting string           `json:"setting,omitempty"`
	Report  *sim.Report      `json:"report"`
	Search  *sim.LimitSearch `json:"search,omitempty"`
	CPUS    float64          `json:"simulation_s"`
}

func runSimulate(ctx context.Context, e *env, f *simulateFlags, args []string) error {
	if f.batchSize == 0 {
		return errors.New("simulate: --batch-size is required")
	}
	if f.batchSize < 0 {
		return fmt.Errorf("simulate: --batch-size %d: must be at least 1", f.batchSize)
	}
	src, err := simulateDataset(ctx, e, f, args)
	if err != nil {
		return err
	}
	name := src.name
	base, err := simulateConfig(f, &src.ds)
	if err != nil {
		return err
	}
	base.IndexRequests, base.Streams = src.opens, src.streams
	maxMem, err := stream.ParseBytes(f.maxMemory)
	if err != nil {
		return fmt.Errorf("simulate: --max-memory: %w", err)
	}
	if f.plotFormat != "png" && f.plotFormat != "svg" {
		return fmt.Errorf("simulate: --plot-format %q: want png or svg", f.plotFormat)
	}
	key, values := "", []string{""}
	if f.vary != "" {
		k, v, ok := strings.Cut(f.vary, "=")
		if !ok || v == "" || k == "" {
			return fmt.Errorf("simulate: --vary %q: want KEY=V1,V2 (comma-separated values; keys: %s)", f.vary, strings.Join(simVaryKeys(), ", "))
		}
		if !slices.Contains(simVaryKeys(), k) {
			return fmt.Errorf("simulate: --vary: unknown key %q (keys: %s)", k, strings.Join(simVaryKeys(), ", "))
		}
		key, values = k, splitVary(k, v)
		if len(values) > simMaxVary {
			return fmt.Errorf("simulate: --vary %s: %d values, at most %d (each is a whole simulation)", key, len(values), simMaxVary)
		}
	}
	// Every setting is checked before the first is played.
	configs := make([]sim.Config, len(values))
	for i, v := range values {
		c := *base
		setting := ""
		if key != "" {
			if strings.TrimSpace(v) == "" {
				return fmt.Errorf("simulate: --vary %s: value %d of %d is empty", key, i+1, len(values))
			}
			if err := applyVary(&c, key, v); err != nil {
				return err
			}
			setting = key + "=" + v
		}
		c.KeepSteps = f.stepsCSV != "" || f.plotDir != ""
		if err := checkSimulateConfig(&c, maxMem, setting); err != nil {
			return err
		}
		if note := simAgentNote(&c); note != "" {
			if setting != "" {
				note = setting + ": " + note
			}
			fmt.Fprintln(e.stderr, note)
		}
		configs[i] = c
	}
	var runs []simulateRun
	for i, v := range values {
		c := configs[i]
		setting := ""
		if key != "" {
			setting = key + "=" + v
		}
		start := time.Now()
		rep, err := sim.Run(ctx, &c)
		if err != nil {
			if setting != "" {
				return fmt.Errorf("simulate: --vary %s: %w", setting, err)
			}
			return err
		}
		run := simulateRun{Setting: setting, Report: rep}
		if f.searchLimit {
			sc := c
			sc.Nodes = []int{0}
			sc.KeepSteps = false
			if run.Search, err = sim.MinCacheLimit(ctx, &sc); err != nil {
				return err
			}
			// The model's search starts at 2 shards per consumer, where
			// the agent wants 3: modelling the agent, no limit it
			// refuses is reported.
			if _, least, _, _ := simLeastLimits(&sc); !sc.RankIterator && float64(run.Search.Limit) < least {
				run.Search.Limit = int64(least)
			}
		}
		run.CPUS = time.Since(start).Seconds()
		runs = append(runs, run)
	}
	if f.stepsCSV != "" {
		if err := writeStepsCSV(f.stepsCSV, runs); err != nil {
			return err
		}
	}
	if f.plotDir != "" {
		files, err := plotSimulation(f.plotDir, f.plotFormat, runs)
		if err != nil {
			return err
		}
		if !f.asJSON {
			defer func() {
				for _, p := range files {
					fmt.Fprintf(e.stdout, "wrote %s\n", p)
				}
			}()
		}
	}
	if f.asJSON {
		var b []byte
		if key == "" {
			b, err = json.Marshal(runs[0])
		} else {
			b, err = json.Marshal(map[string]any{"runs": runs})
		}
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(e.stdout, "%s\n", b)
		return err
	}
	fmt.Fprintf(e.stdout, "dataset %s: %d shards, %d samples, %s stored\n", name, len(src.ds.Shards), sumSamples(&src.ds), fmtSimBytes(sumStored(&src.ds)))
	fmt.Fprintf(e.stdout, "world %d nodes × %d ranks × %d workers, batch %d, step time %s\n",
		base.Shape.Nodes, base.Shape.RanksPerNode, base.Shape.WorkersPerRank, base.Plan.BatchSize, f.stepTime)
	for _, r := range runs {
		printSimRun(e.stdout, &r)
	}
	return nil
}

func sumSamples(d *sim.Dataset) (n int64) {
	for _, s := range d.Shards {
		n += s.Samples
	}
	return n
}

func sumStored(d *sim.Dataset) (n int64) {
	for _, s := range d.Shards {
		n += s.StoredBytes
	}
	return n
}

// simSource is the simulated dataset and what opening it costs.
type simSource struct {
	ds   sim.Dataset
	name string
	// opens is the store requests opening it takes (every stream's;
	// sim.Config.IndexRequests).
	opens int
	// streams splits ds's shards into its streams (nil: one).
	streams []sim.Stream
}

// simulateDataset describes the dataset from the argument or the flags.
func simulateDataset(ctx context.Context, e *env, f *simulateFlags, args []string) (simSource, error) {
	given := 0
	for _, b := range []bool{len(args) > 0, f.shardSizes != "", f.shards > 0 || f.samples != "", len(f.streams) > 0} {
		if b {
			given++
		}
	}
	if given != 1 {
		return simSource{}, errors.New("simulate: give exactly one of DATASET_OR_INDEX, --stream, --shard-sizes or --shards with --samples")
	}
	if len(args) > 0 {
		d, opens, err := simIndexDataset(ctx, e, args[0], f.keepZip)
		return simSource{ds: d, name: args[0], opens: opens}, err
	}
	if len(f.streams) > 0 {
		var src simSource
		var names []string
		var openBytes int64
		for _, spec := range f.streams {
			ps, path, err := parseStreamFlag(spec)
			if err != nil {
				return simSource{}, fmt.Errorf("simulate: %w", err)
			}
			d, opens, err := simIndexDataset(ctx, e, path, f.keepZip)
			if err != nil {
				return simSource{}, err
			}
			src.ds.Shards = append(src.ds.Shards, d.Shards...)
			src.ds.IndexBytes += d.IndexBytes
			src.ds.IndexStampBytes += d.IndexStampBytes
			ob := d.OpenBytes // 0: the index's size
			if ob == 0 {
				ob = d.IndexBytes
			}
			openBytes += ob
			src.opens += opens
			src.streams = append(src.streams, sim.Stream{Shards: len(d.Shards), Proportion: ps.Proportion, Repeat: ps.Repeat, Choose: ps.Choose})
			names = append(names, path)
		}
		src.name = strings.Join(names, " + ")
		if openBytes != src.ds.IndexBytes {
			src.ds.OpenBytes = openBytes
		}
		return src, nil
	}
	per, err := stream.ParseBytes(f.sampleBytes)
	if err != nil {
		return simSource{}, fmt.Errorf("simulate: --sample-bytes: %w", err)
	}
	var sizes []int64
	if f.shardSizes != "" {
		if sizes, err = parseShardSizes(f.shardSizes); err != nil {
			return simSource{}, fmt.Errorf("simulate: %w", err)
		}
	} else {
		if f.shards <= 0 || f.samples == "" {
			return simSource{}, errors.New("simulate: --shards and --samples go together")
		}
		if f.shards > 1<<24 {
			return simSource{}, fmt.Errorf("simulate: --shards %d: at most %d", f.shards, 1<<24)
		}
		total, err := plan.ParseEpochSize(f.samples)
		if err != nil {
			return simSource{}, fmt.Errorf("simulate: --samples: %w", err)
		}
		sizes = make([]int64, f.shards)
		for i := range sizes {
			sizes[i] = total / int64(f.shards)
			if int64(i) < total%int64(f.shards) {
				sizes[i]++
			}
		}
	}
	if err := checkUniformSizes(sizes, per); err != nil {
		return simSource{}, err
	}
	// index.json holds about 400 bytes per shard.
	return simSource{ds: sim.UniformDataset(sizes, per, int64(400*len(sizes))), name: "(synthetic)", opens: 1}, nil
}

// simIndexDataset describes the dataset at src (see readIndexFile) and
// the store requests opening it takes.
func simIndexDataset(ctx context.Context, e *env, src string, keepZip bool) (sim.Dataset, int, error) {
	data, name, open, err := readIndexFile(ctx, e, src)
	if err != nil {
		return sim.Dataset{}, 0, err
	}
	idx, err := format.ParseIndex(data)
	if err != nil {
		return sim.Dataset{}, 0, fmt.Errorf("simulate: %s: %w", name, err)
	}
	d := sim.DatasetFromIndex(idx, int64(len(data)), keepZip)
	d.IndexStampBytes = open.stamp
	if open.bytes != d.IndexBytes {
		d.OpenBytes = open.bytes // a tar dataset's: its index's (or a scan's), not the selection's it caches
	}
	return d, open.requests, nil
}

// readIndexFile reads index.json from a file, a directory or a store URL,
// and returns what stream.Open costs the store to read it from there on a
// fresh cache (for a file or directory, one request of the index's size:
// what opening it from a store takes at the least).
func readIndexFile(ctx context.Context, e *env, src string) (data []byte, name string, open simOpen, err error) {
	if data, name, ok, open, err := readSimTarIndex(ctx, e, src, false); ok {
		return data, name, open, err
	}
	if !strings.Contains(src, "://") {
		name := src
		if fi, err := os.Stat(src); err != nil {
			return nil, "", simOpen{}, fmt.Errorf("simulate: %w", err)
		} else if fi.IsDir() {
			name = src + string(os.PathSeparator) + format.IndexFile
		}
		data, err := readFileLimited(name, stream.DefaultMaxIndexBytes)
		if errors.Is(err, fs.ErrNotExist) && name != src {
			// A directory of WebDataset tars without an index.
			if tdata, tname, ok, _, terr := readSimTarIndex(ctx, e, src, true); ok {
				return tdata, tname, simOpen{requests: 1}, terr
			}
		}
		if err != nil {
			return nil, "", simOpen{}, fmt.Errorf("simulate: %w", err)
		}
		return data, name, simOpen{requests: 1}, nil
	}
	d, err := openDataset(ctx, e, src)
	if err != nil {
		return nil, "", simOpen{}, fmt.Errorf("simulate: %w", err)
	}
	defer d.Close()
	cb := &countingBucket{Bucket: d.bucket}
	data, err = storage.ReadAll(ctx, cb, format.IndexFile, stream.DefaultMaxIndexBytes)
	if errors.Is(err, fs.ErrNotExist) {
		// A store root of WebDataset tars without an index: stream.Open
		// found no index.json either, then lists and scans.
		if tdata, tname, ok, open, terr := readSimTarIndex(ctx, e, src, true); ok {
			return tdata, tname, open, terr
		}
	}
	if err != nil {
		return nil, "", simOpen{}, fmt.Errorf("simulate: %w", err)
	}
	open = cb.open()
	open.stamp = cb.indexStamp(ctx, d.bucket, int64(len(data)))
	return data, d.bucket.URL(format.IndexFile), open, nil
}

// simulateConfig builds the base configuration from the flags.
func simulateConfig(f *simulateFlags, ds *sim.Dataset) (*sim.Config, error) {
	seed := f.shuffleSeed
	c := &sim.Config{
		Dataset: *ds,
		Plan: plan.Options{Shuffle: f.shuffle, ShuffleAlgo: f.shuffleAlgo, ShuffleSeed: &seed,
			ShuffleBlockSize: f.shuffleBlockSize, NumCanonicalNodes: f.numCanonicalNodes, BatchSize: f.batchSize,
			PartitionAlgo: f.partitionAlgo},
		Shape:  plan.Shape{Nodes: f.nodes, RanksPerNode: f.ranks, WorkersPerRank: f.workers},
		Epochs: f.epochs, Predownload: f.predownload, PrefetchConcurrency: f.concurrency,
		RankIterator: f.rankIterator, DecodeCost: f.decodeCost, PrefetchFactor: f.prefetchFactor,
		OrderAdmissions: f.orderAdmissions, WorkerStart: f.workerStart,
		Store: sim.Store{Latency: f.latency},
	}
	var err error
	if c.CacheLimit, err = parseSimCacheLimit(f.cacheLimit); err != nil {
		return nil, fmt.Errorf("simulate: --cache-limit: %w", err)
	}
	if f.epochSize != "" {
		if c.Plan.EpochSize, err = plan.ParseEpochSize(f.epochSize); err != nil {
			return nil, fmt.Errorf("simulate: --epoch-size: %w", err)
		}
	}
	if c.StepTime, err = sim.ParseStepTime(f.stepTime); err != nil {
		return nil, fmt.Errorf("simulate: --step-time: %w", err)
	}
	if c.Store.BandwidthPerNode, err = parseSimRate(f.bwNode); err != nil {
		return nil, fmt.Errorf("simulate: --bandwidth-per-node: %w", err)
	}
	if c.Store.BandwidthTotal, err = parseSimRate(f.bwTotal); err != nil {
		return nil, fmt.Errorf("simulate: --bandwidth-total: %w", err)
	}
	return c, nil
}

// simVaryKeys returns the keys --vary takes (applyVary).
func simVaryKeys() []string {
	return []string{"cache_limit", "shuffle_algo", "shuffle_block_size", "num_canonical_nodes", "predownload",
		"nodes", "batch_size", "workers_per_rank", "prefetch_factor", "step_time", "bandwidth_per_node", "bandwidth_total", "latency"}
}

// applyVary sets one --vary key on c.
func applyVary(c *sim.Config, key, v string) error {
	bad := func(err error) error { return fmt.Errorf("simulate: --vary %s=%s: %w", key, v, err) }
	atoi := func() (int, error) {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return 0, fmt.Errorf("%q is not a whole number", v)
		}
		if n < 0 {
			return 0, errors.New("negative")
		}
		return n, nil
	}
	var err error
	var n int
	switch key {
	case "cache_limit":
		c.CacheLimit, err = parseSimCacheLimit(v)
	case "shuffle_algo":
		c.Plan.ShuffleAlgo = v
	case "shuffle_block_size":
		var b int64
		if b, err = plan.ParseEpochSize(v); err != nil {
			err = fmt.Errorf("%q is not a sample count (%q, %q)", v, "262144", "1m")
		}
		c.Plan.ShuffleBlockSize = b
	case "num_canonical_nodes":
		n, err = atoi()
		c.Plan.NumCanonicalNodes = n
	case "predownload":
		n, err = atoi()
		c.Predownload = n
	case "nodes":
		n, err = atoi()
		c.Shape.Nodes = n
	case "batch_size":
		n, err = atoi()
		c.Plan.BatchSize = n
	case "workers_per_rank":
		n, err = atoi()
		c.Shape.WorkersPerRank = n
	case "prefetch_factor":
		n, err = atoi()
		c.PrefetchFactor = n
	case "step_time":
		c.StepTime, err = sim.ParseStepTime(v)
	case "bandwidth_per_node":
		c.Store.BandwidthPerNode, err = parseSimRate(v)
	case "bandwidth_total":
		c.Store.BandwidthTotal, err = parseSimRate(v)
	case "latency":
		c.Store.Latency, err = time.ParseDuration(v)
		if err == nil && c.Store.Latency < 0 {
			err = errors.New("negative")
		}
	default:
		return fmt.Errorf("simulate: --vary: unknown key %q", key)
	}
	if err != nil {
		return bad(err)
	}
	return nil
}

func printSimRun(w io.Writer, r *simulateRun) {
	rep := r.Report
	if r.Setting != "" {
		fmt.Fprintf(w, "\n== %s\n", r.Setting)
	} else {
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "total: wall %.1fs over %d steps, time to first batch %.3fs, %d stalled steps (%.1fs, longest %.3fs), input wait %.1f%%\n",
		rep.WallS, rep.Steps, rep.TimeToFirstBatchS, rep.StalledSteps, rep.StallS, rep.MaxStallS, 100*rep.InputWaitFraction)
	fmt.Fprintf(w, "       %.0f samples/s, %s in %d requests from the store, peak cache %s per node\n",
		rep.SamplesPerS, fmtSimBytes(rep.StoreBytes), rep.StoreRequests, fmtSimBytes(rep.PeakCacheBytes))
	const maxNodes = 32
	for i, n := range rep.Nodes {
		if i == maxNodes {
			fmt.Fprintf(w, "  ... %d more nodes (--json lists all)\n", len(rep.Nodes)-maxNodes)
			break
		}
		fmt.Fprintf(w, "  node %d: first batch %.3fs, %d stalled steps (%.1fs), wait %.1f%%, %s in %d requests, %d evictions, peak cache %s\n",
			n.Node, n.TimeToFirstBatchS, n.StalledSteps, n.StallS, 100*n.InputWaitFraction,
			fmtSimBytes(n.StoreBytes), n.StoreRequests, n.Evictions, fmtSimBytes(n.PeakCacheBytes))
	}
	if s := r.Search; s != nil {
		if s.StallFree {
			fmt.Fprintf(w, "smallest cache limit with no stall: %s (%d bytes; node 0, %d runs)\n", fmtSimBytes(s.Limit), s.Limit, s.Runs)
		} else {
			fmt.Fprintf(w, "smallest cache limit that adds no stall: %s (%d bytes; node 0, %d runs; %d steps stall even without a limit)\n",
				fmtSimBytes(s.Limit), s.Limit, s.Runs, s.Unlimited.StalledSteps)
		}
	}
	fmt.Fprintf(w, "(simulated in %.2fs)\n", r.CPUS)
}

// writeStepsCSV writes setting,node,step,wait_s rows.
func writeStepsCSV(path string, runs []simulateRun) error {
	var b strings.Builder
	b.WriteString("setting,node,step,input_wait_s\n")
	for _, r := range runs {
		for _, n := range r.Report.Nodes {
			for s, w := range n.StepWaitsS {
				fmt.Fprintf(&b, "%s,%d,%d,%.6f\n", csvField(r.Setting), n.Node, s, w)
			}
		}
	}
	if err := atomicfile.WriteFile(path, 0o644, []byte(b.String())); err != nil {
		return fmt.Errorf("simulate: --steps-csv: %w", err)
	}
	return nil
}

func csvField(s string) string {
	if strings.ContainsAny(s, ",\"\n") {
		return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
	}
	return s
}
