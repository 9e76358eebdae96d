package cli

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicedata/sluice/bench"
	"github.com/sluicedata/sluice/plan"
	"github.com/sluicedata/sluice/stream"
)

type benchFlags struct {
	out         string
	batchSize   int
	stepTime    time.Duration
	workers     int
	shuffle     bool
	shuffleAlgo string
	predownload int
	cacheLimit  string
	maxSteps    int
	baseline    bool
	plot        bool
	format      string
	noGPU       bool
	gpuInterval time.Duration
	torchModel  string
	python      string
	torchDevice string
	imageSize   int
	numClasses  int
	threads     int
}

func newBenchCommand(e *env) *cobra.Command {
	var f benchFlags
	cmd := &cobra.Command{
		Use:   "bench URL",
		Short: "Run the GPU-starvation experiment: cold, warm and a plain-files baseline",
		Long: `Run a training loop with a fixed step time (the GPU's work per batch) over a
dataset as one rank: first cold (an empty node cache under --out), then warm
(the cache the cold run filled), and with --baseline a plain loader reading the
same samples as one file each (as a DataLoader over an image folder does).
Every step's input wait, the throughput, the time to first batch and the wall
time go to summary.csv and steps.csv under --out; when nvidia-smi is on PATH
its utilization and memory readings go to gpu.csv. --plot draws the charts
(see sluice plot).

With --torch-model resnet18 each step is a real torch training step (forward,
backward, SGD on a ResNet-18 written in torch, no torchvision needed) on the
GPU when torch sees one, else the CPU, run by --python (which must import
torch and the sluice package) with sluice.StreamingDataLoader; --step-time is
then unused. --baseline then adds a plain torch DataLoader over the samples
as files and, when MosaicML's streaming package is importable, its
StreamingDataLoader (skipped with the reason otherwise).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runBench(cmd.Context(), e, &f, args[0])
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.out, "out", "sluice-bench", "output directory (CSV files, charts, the node cache)")
	fl.IntVar(&f.batchSize, "batch-size", 32, "batch size")
	fl.DurationVar(&f.stepTime, "step-time", 20*time.Millisecond, "compute time per step")
	fl.IntVar(&f.workers, "workers-per-rank", 1, "DataLoader workers (of the one rank the bench runs)")
	fl.BoolVar(&f.shuffle, "shuffle", false, "shuffle the samples")
	fl.StringVar(&f.shuffleAlgo, "shuffle-algo", plan.AlgoPy1e, "shuffle algorithm")
	fl.IntVar(&f.predownload, "predownload", 0, "samples to prefetch ahead (0: 8×batch size)")
	fl.StringVar(&f.cacheLimit, "cache-limit", "", `cache limit ("1gb"; default: none)`)
	fl.IntVar(&f.maxSteps, "max-steps", 0, "steps per run (0: one epoch)")
	fl.BoolVar(&f.baseline, "baseline", false, "add the plain-files baseline run")
	fl.BoolVar(&f.plot, "plot", false, "draw the charts after the runs")
	fl.StringVar(&f.format, "plot-format", "png", "chart format: png or svg")
	fl.BoolVar(&f.noGPU, "no-gpu", false, "do not sample nvidia-smi")
	fl.DurationVar(&f.gpuInterval, "gpu-interval", 500*time.Millisecond, "nvidia-smi sampling period")
	fl.StringVar(&f.torchModel, "torch-model", "", "train this torch model on the batches instead of sleeping --step-time: "+strings.Join(bench.Models, ", "))
	fl.StringVar(&f.python, "python", "python3", "Python interpreter for --torch-model (with torch and the sluice package)")
	fl.StringVar(&f.torchDevice, "torch-device", "auto", "device for --torch-model: auto (cuda when available), cpu or cuda")
	fl.IntVar(&f.imageSize, "torch-image-size", 224, "side of the square images fed to --torch-model")
	fl.IntVar(&f.numClasses, "torch-classes", 1000, "classes of --torch-model's classifier")
	fl.IntVar(&f.threads, "torch-threads", 0, "torch CPU threads (0: torch's default)")
	// The names of sluice stream and sluice simulate for the same settings
	// above; the earlier ones stay, hidden.
	fl.IntVar(&f.workers, "workers", 1, "DataLoader workers (deprecated: use --workers-per-rank)")
	fl.StringVar(&f.format, "format", "png", "chart format (deprecated: use --plot-format)")
	for _, n := range []string{"workers", "format"} {
		_ = fl.MarkHidden(n)
	}
	return cmd
}

func runBench(ctx context.Context, e *env, f *benchFlags, url string) error {
	if f.format != "png" && f.format != "svg" {
		return fmt.Errorf("bench: --plot-format %q: want png or svg", f.format)
	}
	if f.batchSize <= 0 {
		return fmt.Errorf("bench: --batch-size %d: must be at least 1", f.batchSize)
	}
	for _, n := range []struct {
		flag, value string
		negative    bool
	}{
		{"step-time", f.stepTime.String(), f.stepTime < 0},
		{"workers-per-rank", strconv.Itoa(f.workers), f.workers < 0},
		{"max-steps", strconv.Itoa(f.maxSteps), f.maxSteps < 0},
	} {
		if n.negative {
			return fmt.Errorf("bench: --%s %s: must not be negative", n.flag, n.value)
		}
	}
	c := &bench.Config{
		Options: stream.Options{Remote: url, Registry: e.registry, BatchSize: f.batchSize, Shuffle: f.shuffle,
			ShuffleAlgo: f.shuffleAlgo, Predownload: f.predownload},
		Out: f.out, StepTime: f.stepTime, Workers: f.workers, MaxSteps: f.maxSteps, Baseline: f.baseline,
		NoGPU: f.noGPU, GPUInterval: f.gpuInterval,
		Log: func(format string, args ...any) { fmt.Fprintf(e.stdout, format+"\n", args...) },
	}
	if f.torchModel != "" {
		c.Torch = &bench.Torch{Model: f.torchModel, Python: f.python, Device: f.torchDevice,
			ImageSize: f.imageSize, NumClasses: f.numClasses, Threads: f.threads, Stderr: e.stderr}
	}
	if !strings.Contains(url, "://") {
		// Absolute: the agent a torch run's client starts runs elsewhere.
		abs, err := filepath.Abs(url)
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		c.Options.Remote = "file://" + abs
	}
	if f.cacheLimit != "" {
		n, err := stream.ParseBytes(f.cacheLimit)
		if err != nil {
			return fmt.Errorf("bench: --cache-limit: %w", err)
		}
		c.Options.CacheLimit = n
	}
	res, err := bench.Run(ctx, c)
	if err != nil {
		return err
	}
	files := res.Files
	if f.plot {
		charts, err := bench.Plot(f.out, f.format)
		if err != nil {
			return err
		}
		files = append(files, charts...)
	}
	for _, p := range files {
		fmt.Fprintf(e.stdout, "wrote %s\n", p)
	}
	return nil
}
