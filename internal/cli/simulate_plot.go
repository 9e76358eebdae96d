package cli

import (
	"fmt"
	"os"
	"time"

	"github.com/sluicedata/sluice/bench"
)

// simMaxPlotSeconds bounds the simulated times --plot takes (about 31
// years): a time.Duration holds up to 292 years, and the charts' axes
// refuse larger figures.
const simMaxPlotSeconds = 1e9

// plotSimulation writes the runs as sluice bench's summary.csv and
// steps.csv in dir (one configuration per setting: the run's figures,
// every step's start, its wait for the slowest node's batch and its
// samples over the nodes) and draws sluice plot's charts from them. It
// returns the files written.
func plotSimulation(dir, format string, runs []simulateRun) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("simulate: --plot: %w", err)
	}
	var res bench.Result
	for _, r := range runs {
		rep := r.Report
		name := r.Setting
		if name == "" {
			name = "simulated"
		}
		secs := func(what string, s float64) (time.Duration, error) {
			if s > simMaxPlotSeconds {
				return 0, fmt.Errorf("simulate: --plot: %s: the %s is %.3g s, more than the charts take (%g s)", name, what, s, float64(simMaxPlotSeconds))
			}
			return time.Duration(s * float64(time.Second)), nil
		}
		wall, err := secs("wall time", rep.WallS)
		if err != nil {
			return nil, err
		}
		first, err := secs("time to first batch", rep.TimeToFirstBatchS)
		if err != nil {
			return nil, err
		}
		var mean float64
		if rep.Steps > 0 {
			mean = (rep.TimeToFirstBatchS + rep.StallS) / float64(rep.Steps)
		}
		meanWait, err := secs("mean input wait", mean)
		if err != nil {
			return nil, err
		}
		res.Runs = append(res.Runs, bench.Summary{Config: name, Samples: rep.Samples, Steps: rep.Steps,
			Wall: wall, FirstBatch: first, MeanWait: meanWait, InputWaitFraction: rep.InputWaitFraction,
			SamplesPerSecond: rep.SamplesPerS, BytesFetched: rep.StoreBytes})
		for s := range rep.StepStartsS {
			at, err := secs("step start", rep.StepStartsS[s])
			if err != nil {
				return nil, err
			}
			w, err := secs("step wait", rep.StepWaitsS[s])
			if err != nil {
				return nil, err
			}
			res.Steps = append(res.Steps, bench.Step{Config: name, Step: s, At: at, Wait: w, Samples: int(rep.StepSamples[s])})
		}
	}
	csvs, err := bench.WriteCSV(dir, &res)
	if err != nil {
		return nil, fmt.Errorf("simulate: --plot: %w", err)
	}
	charts, err := bench.Plot(dir, format)
	if err != nil {
		return nil, fmt.Errorf("simulate: --plot: %w", err)
	}
	return append(csvs, charts...), nil
}

// fmtSimBytes writes a byte count in decimal units with three significant
// digits ("512 B", "25.6 kB", "3.65 GB"), so that small and large runs
// both read (a fixed "%.2f GB" printed 0.00 GB below 5 MB).
func fmtSimBytes(n int64) string {
	if n < 1000 {
		return fmt.Sprintf("%d B", n)
	}
	v := float64(n)
	for _, u := range []string{"kB", "MB", "GB", "TB", "PB", "EB"} {
		v /= 1000
		if v < 999.5 || u == "EB" {
			switch {
			case v < 9.995:
				return fmt.Sprintf("%.2f %s", v, u)
			case v < 99.95:
				return fmt.Sprintf("%.1f %s", v, u)
			}
			return fmt.Sprintf("%.0f %s", v, u)
		}
	}
	return fmt.Sprintf("%d B", n)
}
