// Package bench runs the GPU-starvation experiment: a training loop with a
// fixed step time fed from a dataset, cold (an empty node cache) then warm
// (the cache the cold run filled), optionally beside a baseline loader
// that reads the same samples as plain files, recording every step's input
// wait, the throughput, the time to first batch and the wall time, and
// sampling nvidia-smi when it exists. Plot turns the CSV files it writes
// into charts.
package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sluicedata/sluice/plan"
	"github.com/sluicedata/sluice/stream"
)

// Config is one experiment.
type Config struct {
	// Options opens the dataset (Remote, Registry, shuffle, batch size,
	// cache limit...). Local is replaced by a cache directory under Out.
	Options stream.Options
	// Out is the directory for the cache and the CSV files.
	Out string
	// StepTime is the compute time per step (the GPU's work per batch).
	StepTime time.Duration
	// Workers is the number of DataLoader workers (iterators) of the rank.
	Workers int
	// MaxSteps stops each run after this many steps (0: one epoch).
	MaxSteps int
	// Baseline adds a run of the plain-files loader over the same samples,
	// exported once under Out/files.
	Baseline bool
	// GPUInterval is nvidia-smi's sampling period (0: 500 ms); NoGPU
	// skips the sampling.
	GPUInterval time.Duration
	NoGPU       bool
	// Torch, when set, makes each step a real torch training step in
	// Python instead of sleeping StepTime (see Torch).
	Torch *Torch
	// Log receives progress lines (nil: none).
	Log func(format string, args ...any)
}

// Step is one training step of one run.
type Step struct {
	Config string
	Step   int
	// At is the step's start since the run began; Wait the time it waited
	// for its batch; Samples the batch's size.
	At, Wait time.Duration
	Samples  int
}

// Summary is one run's figures.
type Summary struct {
	Config            string
	Samples           int64
	Steps             int
	Wall              time.Duration
	FirstBatch        time.Duration
	MeanWait          time.Duration
	InputWaitFraction float64
	SamplesPerSecond  float64
	BytesFetched      int64
	// Device is where a torch run trained ("cpu", "cuda:0 (NAME)"); empty
	// for the fixed step time.
	Device string
}

// Result is the experiment's outcome.
type Result struct {
	Runs  []Summary
	Steps []Step
	GPU   []GPUSample
	// Files lists the CSV files written.
	Files []string
}

// Run runs cold, warm and (with Baseline) the baseline, writes
// summary.csv, steps.csv and (when nvidia-smi ran) gpu.csv under Out, and
// returns what it measured.
func Run(ctx context.Context, c *Config) (*Result, error) {
	if c.StepTime < 0 || c.Workers < 0 || c.MaxSteps < 0 {
		return nil, errors.New("bench: step time, workers and max steps must not be negative")
	}
	if c.Options.BatchSize <= 0 {
		return nil, errors.New("bench: batch size must be positive")
	}
	if err := os.MkdirAll(c.Out, 0o755); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	logf := c.Log
	if logf == nil {
		logf = func(string, ...any) {}
	}
	var gpu *gpuSampler
	if !c.NoGPU {
		var err error
		if gpu, err = startGPU(ctx, c.GPUInterval); err != nil {
			logf("nvidia-smi: %v (no GPU figures)", err)
		}
	}
	start := time.Now()
	res := &Result{}
	cacheDir := filepath.Join(c.Out, "cache")
	if err := os.RemoveAll(cacheDir); err != nil {
		return nil, fmt.Errorf("bench: clear the cache: %w", err)
	}
	var err error
	if c.Torch != nil {
		err = c.runTorch(ctx, res, cacheDir, logf)
	} else {
		err = c.runStream(ctx, res, cacheDir, start, logf)
	}
	if gpu != nil {
		res.GPU = gpu.stop()
	}
	if err != nil {
		return nil, err
	}
	files, err := writeCSVs(c.Out, res)
	if err != nil {
		return nil, err
	}
	res.Files = files
	return res, nil
}

// runStream is Run's path with the fixed step time: cold, warm, and with
// Baseline the plain-files loader, all in this process.
func (c *Config) runStream(ctx context.Context, res *Result, cacheDir string, start time.Time, logf func(string, ...any)) error {
	for _, name := range []string{"cold", "warm"} {
		s, steps, err := c.streamRun(ctx, name, cacheDir, start)
		if err != nil {
			return err
		}
		logf("%s: %d samples in %s (%.0f samples/s), first batch %s, input wait %.1f%%",
			name, s.Samples, s.Wall.Round(time.Millisecond), s.SamplesPerSecond, s.FirstBatch.Round(time.Millisecond), 100*s.InputWaitFraction)
		res.Runs = append(res.Runs, s)
		res.Steps = append(res.Steps, steps...)
	}
	if c.Baseline {
		s, steps, err := c.baselineRun(ctx, cacheDir, start)
		if err != nil {
			return err
		}
		logf("baseline: %d samples in %s (%.0f samples/s), first batch %s, input wait %.1f%%",
			s.Samples, s.Wall.Round(time.Millisecond), s.SamplesPerSecond, s.FirstBatch.Round(time.Millisecond), 100*s.InputWaitFraction)
		res.Runs = append(res.Runs, s)
		res.Steps = append(res.Steps, steps...)
	}
	return nil
}

// loop runs the training loop over next (which returns a batch's size, 0
// at the end) and returns the run's steps and summary.
func (c *Config) loop(ctx context.Context, name string, next func() (int, error)) (Summary, []Step, error) {
	var steps []Step
	s := Summary{Config: name}
	begin := time.Now()
	var wait time.Duration
	for c.MaxSteps == 0 || s.Steps < c.MaxSteps {
		t0 := time.Now()
		n, err := next()
		if err != nil {
			return s, nil, err
		}
		if n == 0 {
			break
		}
		w := time.Since(t0)
		if s.Steps == 0 {
			s.FirstBatch = time.Since(begin)
		}
		steps = append(steps, Step{Config: name, Step: s.Steps, At: t0.Sub(begin), Wait: w, Samples: n})
		wait += w
		s.Steps++
		s.Samples += int64(n)
		if c.StepTime > 0 {
			t := time.NewTimer(c.StepTime)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return s, nil, ctx.Err()
			}
		}
	}
	s.Wall = time.Since(begin)
	if s.Steps > 0 {
		s.MeanWait = wait / time.Duration(s.Steps)
	}
	if s.Wall > 0 {
		s.InputWaitFraction = float64(wait) / float64(s.Wall)
		s.SamplesPerSecond = float64(s.Samples) / s.Wall.Seconds()
	}
	return s, steps, nil
}

// streamRun reads one epoch of rank 0 through the cache at dir.
func (c *Config) streamRun(ctx context.Context, name, dir string, _ time.Time) (Summary, []Step, error) {
	o := c.Options
	o.Local = dir
	ds, err := stream.Open(ctx, &o)
	if err != nil {
		return Summary{}, nil, err
	}
	defer ds.Close()
	ep, err := ds.NewEpoch(ctx, plan.World{Nodes: 1, RanksPerNode: 1}, max(c.Workers, 1))
	if err != nil {
		return Summary{}, nil, err
	}
	it, err := ep.RankIter(ctx)
	if err != nil {
		return Summary{}, nil, err
	}
	defer it.Close()
	batch := o.BatchSize
	s, steps, err := c.loop(ctx, name, func() (int, error) {
		n := 0
		for n < batch && it.Next() {
			n++
		}
		return n, it.Err()
	})
	s.BytesFetched = ds.Stats().BytesFetched
	return s, steps, err
}
