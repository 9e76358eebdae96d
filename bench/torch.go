package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/sluicedata/sluice/plan"
)

// Torch makes every step a real torch training step (forward, backward,
// SGD) of Model on the batch, in a Python process running the Sluice
// client's sluice._benchtorch: on the GPU when torch sees one (Device
// "auto"), else the CPU. The cold and warm runs read through
// sluice.StreamingDataLoader over the agent, the baseline through a plain
// torch DataLoader over the exported files, and, when MosaicML's streaming
// package is importable, a mosaicml run through its StreamingDataLoader.
type Torch struct {
	// Model names the model: "resnet18".
	Model string
	// Python is the interpreter with torch and the sluice package ("":
	// python3).
	Python string
	// Device is "auto" (cuda when available), "cpu" or "cuda".
	Device string
	// ImageSize is the side of the square images fed to the model (0:
	// 224); NumClasses its classes (0: 1000).
	ImageSize, NumClasses int
	// Threads bounds torch's CPU threads (0: torch's default).
	Threads int
	// SluiceBin is the sluice binary the client starts its agent with
	// ("": $SLUICE_BIN, else this executable).
	SluiceBin string
	// Stderr receives the Python process's standard error (nil: discarded
	// unless it fails, when its tail is in the error).
	Stderr io.Writer
}

// Models lists the models Torch.Model may name.
var Models = []string{"resnet18"}

// ErrNoTorch is matched (errors.Is) by Run's error when Torch is set and
// the interpreter cannot import torch.
var ErrNoTorch = errors.New("bench: torch is not importable")

func (t *Torch) python() string {
	if t.Python == "" {
		return "python3"
	}
	return t.Python
}

// check verifies that the interpreter imports torch and the sluice
// client, and names what is missing.
func (t *Torch) check(ctx context.Context) error {
	if !contains(Models, t.Model) {
		return fmt.Errorf("bench: --torch-model %q: want one of %s", t.Model, strings.Join(Models, ", "))
	}
	switch t.Device {
	case "", "auto", "cpu", "cuda":
	default:
		return fmt.Errorf("bench: torch device %q: want auto, cpu or cuda", t.Device)
	}
	cmd := exec.CommandContext(ctx, t.python(), "-c", "import torch, numpy, sluice._benchtorch")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
			msg = msg[i+1:]
		}
		return fmt.Errorf("%w by %s (%v): %s", ErrNoTorch, t.python(), err, msg)
	}
	return nil
}

// torchConfig is what sluice._benchtorch reads.
type torchConfig struct {
	Mode         string `json:"mode"`
	Remote       string `json:"remote"`
	Local        string `json:"local"`
	Files        string `json:"files,omitempty"`
	BatchSize    int    `json:"batch_size"`
	Workers      int    `json:"workers"`
	Shuffle      bool   `json:"shuffle"`
	ShuffleSeed  int64  `json:"shuffle_seed"`
	CacheLimit   int64  `json:"cache_limit,omitempty"`
	MaxSteps     int    `json:"max_steps"`
	Model        string `json:"model"`
	Device       string `json:"device"`
	ImageSize    int    `json:"image_size"`
	NumClasses   int    `json:"num_classes"`
	TorchThreads int    `json:"torch_threads,omitempty"`
}

// torchLine is one line the driver prints.
type torchLine struct {
	Step    *int    `json:"step"`
	T       float64 `json:"t"`
	Wait    float64 `json:"wait"`
	Compute float64 `json:"compute"`
	Samples int     `json:"samples"`
	Summary *struct {
		Samples      int64              `json:"samples"`
		Steps        int                `json:"steps"`
		Wall         float64            `json:"wall"`
		FirstBatch   float64            `json:"first_batch"`
		Wait         float64            `json:"wait"`
		Device       string             `json:"device"`
		GPU          string             `json:"gpu"`
		BytesFetched int64              `json:"bytes_fetched"`
		Metrics      map[string]float64 `json:"metrics"`
	} `json:"summary"`
	Skipped string `json:"skipped"`
}

// errSkipped reports a run the driver could not make here.
type errSkipped struct{ why string }

func (e *errSkipped) Error() string { return e.why }

// torchRun runs one configuration through the driver.
func (c *Config) torchRun(ctx context.Context, name, mode, local, files string) (Summary, []Step, error) {
	t := c.Torch
	seed := int64(plan.DefaultShuffleSeed)
	if c.Options.ShuffleSeed != nil {
		seed = *c.Options.ShuffleSeed
	}
	tc := torchConfig{
		Mode: mode, Remote: c.Options.Remote, Local: local, Files: files, BatchSize: c.Options.BatchSize,
		Workers: c.Workers, Shuffle: c.Options.Shuffle, ShuffleSeed: seed, CacheLimit: c.Options.CacheLimit,
		MaxSteps: c.MaxSteps, Model: t.Model, Device: t.Device, ImageSize: t.ImageSize, NumClasses: t.NumClasses,
		TorchThreads: t.Threads,
	}
	if tc.Device == "" {
		tc.Device = "auto"
	}
	if tc.ImageSize <= 0 {
		tc.ImageSize = 224
	}
	if tc.NumClasses <= 0 {
		tc.NumClasses = 1000
	}
	arg, _ := json.Marshal(tc)
	cmd := exec.CommandContext(ctx, t.python(), "-m", "sluice._benchtorch", string(arg))
	bin := t.SluiceBin
	if bin == "" {
		bin = os.Getenv("SLUICE_BIN")
	}
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return Summary{}, nil, fmt.Errorf("bench: find the sluice binary: %w", err)
		}
		bin = exe
	}
	// Its own agent, so that the cold run starts from nothing in memory
	// either; it exits soon after the last run.
	cmd.Env = append(os.Environ(), "SLUICE_BIN="+bin, "SLUICE_AGENT_DIR="+filepath.Join(c.Out, "agent"),
		"SLUICE_AGENT_IDLE_TIMEOUT=5s")
	var tail tailBuffer
	cmd.Stderr = &tail
	if t.Stderr != nil {
		cmd.Stderr = io.MultiWriter(&tail, t.Stderr)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return Summary{}, nil, fmt.Errorf("bench: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return Summary{}, nil, fmt.Errorf("bench: run %s: %w", t.python(), err)
	}
	s := Summary{Config: name}
	var steps []Step
	var skipped string
	var parseErr error
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var l torchLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			if parseErr == nil {
				parseErr = fmt.Errorf("bench: %s run: driver printed %q: %w", name, sc.Text(), err)
			}
			continue
		}
		switch {
		case l.Step != nil:
			steps = append(steps, Step{Config: name, Step: *l.Step, At: seconds(l.T), Wait: seconds(l.Wait), Samples: l.Samples})
		case l.Summary != nil:
			m := l.Summary
			s.Samples, s.Steps, s.Wall, s.FirstBatch = m.Samples, m.Steps, seconds(m.Wall), seconds(m.FirstBatch)
			s.BytesFetched = m.BytesFetched
			if s.Steps > 0 {
				s.MeanWait = seconds(m.Wait) / time.Duration(s.Steps)
			}
			if m.Wall > 0 {
				s.InputWaitFraction = m.Wait / m.Wall
				s.SamplesPerSecond = float64(m.Samples) / m.Wall
			}
			s.Device = m.Device
			if m.GPU != "" {
				s.Device += " (" + m.GPU + ")"
			}
		case l.Skipped != "":
			skipped = l.Skipped
		}
	}
	scanErr := sc.Err()
	if scanErr != nil {
		_, _ = io.Copy(io.Discard, out)
	}
	if err := cmd.Wait(); err != nil {
		return Summary{}, nil, fmt.Errorf("bench: %s run (%s -m sluice._benchtorch): %w\n%s", name, t.python(), err, tail.String())
	}
	if scanErr != nil {
		return Summary{}, nil, fmt.Errorf("bench: %s run: reading the driver's output: %w", name, scanErr)
	}
	if parseErr != nil {
		return Summary{}, nil, parseErr
	}
	if skipped != "" {
		return Summary{}, nil, &errSkipped{why: skipped}
	}
	if s.Steps != len(steps) {
		return Summary{}, nil, fmt.Errorf("bench: %s run: the driver reported %d steps and summed %d\n%s", name, len(steps), s.Steps, tail.String())
	}
	return s, steps, nil
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// tailBuffer keeps the last 8 KiB written to it.
type tailBuffer struct{ b []byte }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 8<<10 {
		t.b = append(t.b[:0], t.b[len(t.b)-8<<10:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return string(t.b) }

// runTorch is Run's path with Torch set: cold, warm, and with Baseline
// the files baseline and MosaicML's loader (skipped, with the reason
// logged, when streaming is not importable).
func (c *Config) runTorch(ctx context.Context, res *Result, cacheDir string, logf func(string, ...any)) error {
	if err := c.Torch.check(ctx); err != nil {
		return err
	}
	report := func(s Summary) {
		logf("%s: %d samples in %s (%.0f samples/s), first batch %s, input wait %.1f%%, %s on %s",
			s.Config, s.Samples, s.Wall.Round(time.Millisecond), s.SamplesPerSecond, s.FirstBatch.Round(time.Millisecond),
			100*s.InputWaitFraction, c.Torch.Model, s.Device)
	}
	for _, name := range []string{"cold", "warm"} {
		s, steps, err := c.torchRun(ctx, name, "sluice", cacheDir, "")
		if err != nil {
			return err
		}
		report(s)
		res.Runs = append(res.Runs, s)
		res.Steps = append(res.Steps, steps...)
	}
	if !c.Baseline {
		return nil
	}
	files := filepath.Join(c.Out, "files")
	if _, err := c.exportFiles(ctx, cacheDir, files); err != nil {
		return err
	}
	s, steps, err := c.torchRun(ctx, "baseline", "files", cacheDir, files)
	if err != nil {
		return err
	}
	report(s)
	res.Runs = append(res.Runs, s)
	res.Steps = append(res.Steps, steps...)
	mcache := filepath.Join(c.Out, "mosaicml-cache")
	if err := os.RemoveAll(mcache); err != nil {
		return fmt.Errorf("bench: clear MosaicML's cache: %w", err)
	}
	s, steps, err = c.torchRun(ctx, "mosaicml", "mosaicml", mcache, "")
	var sk *errSkipped
	if errors.As(err, &sk) {
		logf("mosaicml: skipped: %s", sk.why)
		return nil
	}
	if err != nil {
		return err
	}
	report(s)
	res.Runs = append(res.Runs, s)
	res.Steps = append(res.Steps, steps...)
	return nil
}
