package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/plan"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/stream"
)

// planFlags are the flags of `sluice plan`, named after MosaicML's
// StreamingDataset arguments.
type planFlags struct {
	shuffle              bool
	shuffleAlgo          string
	shuffleSeed          int64
	shuffleBlockSize     int64
	numCanonicalNodes    int
	batchSize            int
	partitionAlgo        string
	samplingMethod       string
	samplingGranularity  int64
	batchingMethod       string
	epochSize            string
	nodes                int
	ranksPerNode         int
	workersPerRank       int
	aliases              worldAliases
	epoch                int64
	sampleInEpoch        int64
	initialPhysicalNodes int
	statePath            string
	numSamples           int64
	shardSizes           string
	streams              []string
	asJSON               bool
	rank                 int
	step                 int
	maxSteps             int
	store                storeFlags
}

// maxIndexSize bounds the index.json the plan command reads.
const maxIndexSize = 1 << 30

func newPlanCommand(e *env) *cobra.Command {
	var f planFlags
	cmd := &cobra.Command{
		Use:   "plan [DATASET_OR_INDEX]",
		Short: "Print the epoch plan: which samples each node, rank and worker sees",
		Long: `Print the epoch plan MosaicML Streaming would compute for a dataset: the
samples each node, rank and DataLoader worker sees at each step.

The dataset is a directory or URL holding index.json, or an index.json file;
--num-samples or --shard-sizes describe one without files, and repeated
--stream PATH[,proportion=P][,repeat=R][,choose=N] mixes several.

With --json the output is {"work_shape": [...], "work": [...]}, equal to
MosaicML's generate_work() (flattened, -1 for padding). Otherwise a readable
view lists each step's batch per rank; --rank R --step S names the samples of
one batch (step S counts the batches this plan yields on rank R, from
--sample-in-epoch on). --state FILE resumes from a saved state dict, Sluice's
or MosaicML's.`,
		Args: cobra.MaximumNArgs(1),
		RunE: storeRunE(&f.store, func(cmd *cobra.Command, args []string) error {
			return runPlan(cmd.Context(), e, cmd, &f, args)
		}),
	}
	addStoreFlags(cmd, &f.store)
	fl := cmd.Flags()
	fl.BoolVar(&f.shuffle, "shuffle", false, "shuffle the samples")
	fl.StringVar(&f.shuffleAlgo, "shuffle-algo", plan.AlgoPy1e, shuffleAlgoHelp)
	fl.Int64Var(&f.shuffleSeed, "shuffle-seed", plan.DefaultShuffleSeed, "shuffle seed")
	fl.Int64Var(&f.shuffleBlockSize, "shuffle-block-size", 0, "shuffle block size (0: max(4000000/NCN, 262144))")
	fl.IntVar(&f.numCanonicalNodes, "num-canonical-nodes", 0, "canonical nodes (0: nodes, or 64×nodes for py1s/py2s)")
	fl.IntVar(&f.batchSize, "batch-size", 0, "per-device batch size (required)")
	fl.StringVar(&f.partitionAlgo, "partition-algo", plan.PartitionRelaxed, "partition algorithm: orig or relaxed")
	fl.StringVar(&f.samplingMethod, "sampling-method", plan.SamplingBalanced, "sampling method: balanced or fixed")
	fl.Int64Var(&f.samplingGranularity, "sampling-granularity", 1, "pick size for partial stream repeats")
	fl.StringVar(&f.batchingMethod, "batching-method", plan.BatchingRandom, "batching method: random, stratified, per_stream or device_per_stream")
	fl.StringVar(&f.epochSize, "epoch-size", "", `samples per epoch ("100k", "1.5m"; default: all chosen samples)`)
	fl.IntVar(&f.nodes, "nodes", 1, "physical nodes")
	fl.IntVar(&f.ranksPerNode, "ranks-per-node", 1, "ranks (devices) per node")
	fl.IntVar(&f.workersPerRank, "workers-per-rank", 1, "DataLoader workers per rank")
	addWorldAliases(fl, &f.aliases)
	fl.Int64Var(&f.epoch, "epoch", 0, "epoch")
	fl.Int64Var(&f.sampleInEpoch, "sample-in-epoch", 0, "samples of the epoch already consumed over all ranks (resume)")
	fl.IntVar(&f.initialPhysicalNodes, "initial-physical-nodes", 0, "node count of the first run when resuming (0: none)")
	fl.StringVar(&f.statePath, "state", "", "resume from a state dict JSON file (Sluice's or MosaicML's state_dict): sets the epoch, sample in epoch, canonical nodes, seed and initial nodes")
	fl.Int64Var(&f.numSamples, "num-samples", 0, "plan a dataset of this many samples in one shard instead of reading one")
	fl.StringVar(&f.shardSizes, "shard-sizes", "", "plan a dataset with these comma-separated shard sample counts")
	fl.StringArrayVar(&f.streams, "stream", nil, "a stream PATH[,proportion=P][,repeat=R][,choose=N] (repeatable)")
	fl.BoolVar(&f.asJSON, "json", false, `print {"work_shape": [...], "work": [...]} as MosaicML's generate_work`)
	fl.IntVar(&f.rank, "rank", -1, "only this global rank")
	fl.IntVar(&f.step, "step", -1, "only this step (batch index on the rank); with --rank names the batch's samples")
	fl.IntVar(&f.maxSteps, "max-steps", 20, "steps to show in the readable view (0: all)")
	return cmd
}

func runPlan(ctx context.Context, e *env, cmd *cobra.Command, f *planFlags, args []string) error {
	if err := applyWorldAliases(cmd, &f.aliases, &f.nodes, &f.ranksPerNode, &f.workersPerRank); err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	streams, names, err := planStreams(ctx, e, f, args)
	if err != nil {
		return err
	}
	opts := &plan.Options{
		Shuffle:             f.shuffle,
		ShuffleAlgo:         f.shuffleAlgo,
		ShuffleSeed:         &f.shuffleSeed,
		ShuffleBlockSize:    f.shuffleBlockSize,
		NumCanonicalNodes:   f.numCanonicalNodes,
		BatchSize:           f.batchSize,
		PartitionAlgo:       f.partitionAlgo,
		SamplingMethod:      f.samplingMethod,
		SamplingGranularity: f.samplingGranularity,
		BatchingMethod:      f.batchingMethod,
	}
	if f.statePath != "" {
		data, err := readFileLimited(f.statePath, 1<<20)
		if err != nil {
			return fmt.Errorf("plan: --state: %w", err)
		}
		st, err := plan.ParseState(data)
		if err != nil {
			return fmt.Errorf("plan: --state %s: %w", f.statePath, err)
		}
		if st.Epoch < 0 {
			return fmt.Errorf("plan: --state %s: epoch %d: the state was saved before any iteration", f.statePath, st.Epoch)
		}
		// As MosaicML's load_state_dict: the state's values win.
		f.epoch, f.sampleInEpoch, f.shuffleSeed = st.Epoch, st.SampleInEpoch, st.ShuffleSeed
		opts.ShuffleSeed = &f.shuffleSeed
		if st.NumCanonicalNodes > 0 {
			f.numCanonicalNodes = st.NumCanonicalNodes
			opts.NumCanonicalNodes = st.NumCanonicalNodes
		}
		f.initialPhysicalNodes = st.InitialPhysicalNodes
	}
	if f.batchSize <= 0 {
		return errors.New("plan: --batch-size is required (MosaicML: \"Please pass batch_size\")")
	}
	if f.samplingGranularity <= 0 {
		return fmt.Errorf("plan: --sampling-granularity %d must be positive", f.samplingGranularity)
	}
	if f.shuffleBlockSize < 0 || f.numCanonicalNodes < 0 || f.initialPhysicalNodes < 0 {
		return errors.New("plan: --shuffle-block-size, --num-canonical-nodes and --initial-physical-nodes must not be negative")
	}
	if f.epochSize != "" {
		if opts.EpochSize, err = plan.ParseEpochSize(f.epochSize); err != nil {
			return err
		}
	}
	p, err := plan.New(streams, opts)
	if err != nil {
		return err // plan's errors name the package already
	}
	shape := plan.Shape{Nodes: f.nodes, RanksPerNode: f.ranksPerNode, WorkersPerRank: f.workersPerRank}
	ep, err := p.Epoch(plan.EpochSpec{Epoch: f.epoch, SampleInEpoch: f.sampleInEpoch, Shape: shape,
		InitialPhysicalNodes: f.initialPhysicalNodes})
	if err != nil {
		return err
	}
	w := bufio.NewWriter(e.stdout)
	if f.asJSON {
		err = writePlanJSON(w, ep)
	} else {
		err = writePlanText(w, p, ep, names, f)
	}
	if err != nil {
		return err
	}
	return w.Flush()
}

// planStreams builds the plan's streams from the arguments and flags, with
// a display name for each.
func planStreams(ctx context.Context, e *env, f *planFlags, args []string) ([]plan.Stream, []string, error) {
	sources := 0
	if len(args) > 0 {
		sources++
	}
	if f.numSamples != 0 {
		sources++
	}
	if f.shardSizes != "" {
		sources++
	}
	if len(f.streams) > 0 {
		sources++
	}
	if sources != 1 {
		return nil, nil, errors.New("plan: give exactly one of DATASET_OR_INDEX, --num-samples, --shard-sizes or --stream")
	}
	switch {
	case f.numSamples != 0:
		if f.numSamples < 0 {
			return nil, nil, fmt.Errorf("plan: --num-samples %d must be positive", f.numSamples)
		}
		return []plan.Stream{{ShardSizes: []int64{f.numSamples}}}, []string{"--num-samples"}, nil
	case f.shardSizes != "":
		sizes, err := parseShardSizes(f.shardSizes)
		if err != nil {
			return nil, nil, err
		}
		return []plan.Stream{{ShardSizes: sizes}}, []string{"--shard-sizes"}, nil
	case len(args) > 0:
		sizes, err := readShardSizes(ctx, e, args[0])
		if err != nil {
			return nil, nil, err
		}
		return []plan.Stream{{ShardSizes: sizes}}, []string{args[0]}, nil
	}
	var streams []plan.Stream
	var names []string
	for _, spec := range f.streams {
		s, path, err := parseStreamFlag(spec)
		if err != nil {
			return nil, nil, fmt.Errorf("plan: %w", err)
		}
		if s.ShardSizes, err = readShardSizes(ctx, e, path); err != nil {
			return nil, nil, err
		}
		streams = append(streams, s)
		names = append(names, path)
	}
	return streams, names, nil
}

func parseShardSizes(s string) ([]int64, error) {
	var sizes []int64
	for _, part := range strings.Split(s, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(part), 10, 64)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("plan: --shard-sizes: %q is not a sample count", part)
		}
		sizes = append(sizes, n)
	}
	return sizes, nil
}

// parseStreamFlag parses PATH[,proportion=P][,repeat=R][,choose=N].
func parseStreamFlag(spec string) (plan.Stream, string, error) {
	parts := strings.Split(spec, ",")
	var s plan.Stream
	path := parts[0]
	if path == "" {
		return s, "", fmt.Errorf("--stream %q: missing path", spec)
	}
	for _, kv := range parts[1:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return s, "", fmt.Errorf("--stream %q: %q is not key=value", spec, kv)
		}
		switch k {
		case "proportion", "repeat":
			x, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return s, "", fmt.Errorf("--stream %q: %s=%q is not a number", spec, k, v)
			}
			if k == "proportion" {
				s.Proportion = &x
			} else {
				s.Repeat = &x
			}
		case "choose":
			n, err := plan.ParseEpochSize(v)
			if err != nil {
				return s, "", fmt.Errorf("--stream %q: choose=%q is not a sample count", spec, v)
			}
			s.Choose = &n
		default:
			return s, "", fmt.Errorf("--stream %q: unknown key %q (want proportion, repeat or choose)", spec, k)
		}
	}
	return s, path, nil
}

// readShardSizes reads the per-shard sample counts of a dataset: a local
// index.json file, a local directory holding one, or a store URL of a
// dataset root.
func readShardSizes(ctx context.Context, e *env, src string) ([]int64, error) {
	var data []byte
	var err error
	name := src
	if td, terr := stream.ParseTarDataset(src); terr != nil {
		return nil, fmt.Errorf("plan: %w", terr)
	} else if td != nil {
		// WebDataset tars: the index beside them, or one built from them.
		b, err := openStore(ctx, e, td.Root)
		if err != nil {
			return nil, fmt.Errorf("plan: %w", err)
		}
		defer b.Close()
		idx, err := stream.ReadTarIndex(ctx, b, td.Keys)
		if err != nil {
			return nil, fmt.Errorf("plan: %w", err)
		}
		data = format.AppendIndex(nil, idx)
	} else if !strings.Contains(src, "://") {
		fi, serr := os.Stat(src)
		if serr != nil {
			return nil, fmt.Errorf("plan: %w", serr)
		}
		if fi.IsDir() {
			name = filepath.Join(src, "index.json")
		}
		data, err = readFileLimited(name, maxIndexSize)
	} else {
		var b storage.Bucket
		b, err = openStore(ctx, e, src)
		if err == nil {
			name = b.URL("index.json")
			data, err = storage.ReadAll(ctx, b, "index.json", maxIndexSize)
			err = errors.Join(err, b.Close())
		}
	}
	if err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	idx, err := format.ParseIndex(data)
	if err != nil {
		return nil, fmt.Errorf("plan: %s: %w", name, err)
	}
	sizes := make([]int64, len(idx.Shards))
	for i := range idx.Shards {
		sizes[i] = int64(idx.Shards[i].Samples)
	}
	return sizes, nil
}

func readFileLimited(name string, limit int64) ([]byte, error) {
	fh, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: larger than %d bytes", name, limit)
	}
	return data, nil
}

// writePlanJSON writes generate_work's output as Python's json.dumps would.
func writePlanJSON(w io.Writer, ep *plan.Epoch) error {
	shape, data, err := ep.Work()
	if err != nil {
		return err
	}
	buf := make([]byte, 0, 64*1024)
	buf = append(buf, `{"work_shape": [`...)
	for i, d := range shape {
		if i > 0 {
			buf = append(buf, ", "...)
		}
		buf = strconv.AppendInt(buf, int64(d), 10)
	}
	buf = append(buf, `], "work": [`...)
	for i, x := range data {
		if i > 0 {
			buf = append(buf, ", "...)
		}
		buf = strconv.AppendInt(buf, x, 10)
		if len(buf) > 60*1024 {
			if _, err := w.Write(buf); err != nil {
				return err
			}
			buf = buf[:0]
		}
	}
	buf = append(buf, "]}\n"...)
	_, err = w.Write(buf)
	return err
}

// writePlanText writes the readable view.
func writePlanText(w io.Writer, p *plan.Planner, ep *plan.Epoch, names []string, f *planFlags) error {
	spec := ep.Spec()
	shape := spec.Shape
	ranks := shape.NumRanks()
	if f.rank >= ranks {
		return fmt.Errorf("--rank %d outside the %d ranks", f.rank, ranks)
	}
	wshape, err := ep.WorkShape()
	if err != nil {
		return err
	}
	if f.rank >= 0 && f.step >= 0 {
		return writeBatch(w, p, ep, f.rank, f.step)
	}
	fmt.Fprintf(w, "dataset: %d samples in %d shards", p.NumSamples(), p.NumShards())
	if len(names) == 1 {
		fmt.Fprintf(w, " (%s)", names[0])
	}
	fmt.Fprintln(w)
	for i, s := range p.Streams() {
		if len(names) > 1 {
			fmt.Fprintf(w, "  stream %d %s: %d samples, choose %d (proportion %.4g, repeat %.4g)\n",
				i, names[i], s.Samples, s.Choose, s.Proportion, s.Repeat)
		}
	}
	fmt.Fprintf(w, "epoch %d: %d samples, starting at sample %d\n", spec.Epoch, p.EpochSize(), spec.SampleInEpoch)
	algo := "off"
	if f.shuffle {
		algo = fmt.Sprintf("%s, seed %d, block size %d", f.shuffleAlgo, *spec.ShuffleSeed, spec.ShuffleBlockSize)
	}
	fmt.Fprintf(w, "shuffle: %s\n", algo)
	fmt.Fprintf(w, "canonical nodes %d, partition %s, batching %s, sampling %s\n",
		spec.NumCanonicalNodes, f.partitionAlgo, f.batchingMethod, f.samplingMethod)
	fmt.Fprintf(w, "world: %d nodes × %d ranks × %d workers, batch size %d; work shape %v\n",
		shape.Nodes, shape.RanksPerNode, shape.WorkersPerRank, f.batchSize, wshape)

	// rank → its DataLoader batches.
	batches := make([][][]int64, ranks)
	steps := 0
	for r := range ranks {
		if f.rank >= 0 && r != f.rank {
			continue
		}
		b, err := ep.RankBatches(r/shape.RanksPerNode, r%shape.RanksPerNode)
		if err != nil {
			return err
		}
		batches[r] = b
		steps = max(steps, len(b))
	}
	fmt.Fprintf(w, "%d steps\n", steps)
	first, last := 0, steps
	if f.step >= 0 {
		first, last = f.step, min(f.step+1, steps)
	} else if f.maxSteps > 0 {
		last = min(steps, f.maxSteps)
	}
	for t := first; t < last; t++ {
		for r := range ranks {
			if batches[r] == nil || t >= len(batches[r]) {
				continue
			}
			fmt.Fprintf(w, "step %d rank %d: %s\n", t, r, formatIDs(batches[r][t]))
		}
	}
	if last < steps && f.step < 0 {
		fmt.Fprintf(w, "… %d more steps (--max-steps 0 shows all)\n", steps-last)
	}
	return nil
}

// writeBatch names the samples of one batch: the loss-spike question.
func writeBatch(w io.Writer, p *plan.Planner, ep *plan.Epoch, rank, step int) error {
	shape := ep.Spec().Shape
	node, local := rank/shape.RanksPerNode, rank%shape.RanksPerNode
	batches, err := ep.RankBatches(node, local)
	if err != nil {
		return err
	}
	if step >= len(batches) {
		return fmt.Errorf("--step %d: rank %d has only %d steps this epoch", step, rank, len(batches))
	}
	b := batches[step]
	fmt.Fprintf(w, "epoch %d, step %d, rank %d (node %d, local rank %d): %d samples\n",
		ep.Spec().Epoch, step, rank, node, local, len(b))
	fmt.Fprintln(w, "sample\tshard\tindex")
	for _, id := range b {
		shard, idx, err := p.Locate(id)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%d\t%d\t%d\n", id, shard, idx)
	}
	return nil
}

func formatIDs(ids []int64) string {
	var sb strings.Builder
	for i, x := range ids {
		if i > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString(strconv.FormatInt(x, 10))
	}
	return sb.String()
}
