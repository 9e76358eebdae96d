package bench

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Plot reads the CSV files Run wrote in dir and writes the charts there
// as format ("png" or "svg"): throughput per configuration, the per-step
// input wait over time and its distribution per configuration, and, when
// gpu.csv exists, each GPU's utilization over time. It returns the files
// written.
func Plot(dir, format string) ([]string, error) {
	if format != "png" && format != "svg" {
		return nil, fmt.Errorf("bench: plot format %q: want png or svg", format)
	}
	sumPath := filepath.Join(dir, SummaryFile)
	sums, err := readCSV(sumPath, summaryHeader, false)
	if err != nil {
		return nil, err
	}
	if len(sums) == 0 {
		return nil, fmt.Errorf("bench: %s has no runs", sumPath)
	}
	stepPath := filepath.Join(dir, StepsFile)
	steps, err := readCSV(stepPath, stepsHeader, false)
	if err != nil {
		return nil, err
	}
	if len(steps) == 0 {
		// The input-wait charts would have nothing on their axes.
		return nil, fmt.Errorf("bench: %s has no steps", stepPath)
	}
	gpuPath := filepath.Join(dir, GPUFile)
	gpus, err := readCSV(gpuPath, gpuHeader, true)
	if err != nil {
		return nil, err
	}
	var out []string
	save := func(p *plot.Plot, name string, w, h vg.Length) error {
		path := filepath.Join(dir, name+"."+format)
		tmp := path + ".tmp"
		if err := p.Save(w, h, tmp+"."+format); err != nil {
			return fmt.Errorf("bench: %s: %w", path, err)
		}
		if err := os.Rename(tmp+"."+format, path); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		out = append(out, path)
		return nil
	}

	// Throughput per configuration.
	names := make([]string, len(sums))
	rates := make(plotter.Values, len(sums))
	for i, r := range sums {
		names[i] = r[0]
		if rates[i], err = parseF(sumPath, i, r[7]); err != nil {
			return nil, err
		}
	}
	p := plot.New()
	p.Title.Text = "Throughput per configuration"
	p.Y.Label.Text = "samples/s"
	bars, err := plotter.NewBarChart(rates, vg.Points(40))
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	bars.Color = plotutil.Color(0)
	p.Add(bars)
	p.NominalX(names...)
	if err := save(p, "throughput", 5*vg.Inch, 3.5*vg.Inch); err != nil {
		return nil, err
	}

	// Per-step input wait: over time, and its distribution.
	type series struct {
		xy    plotter.XYs
		waits plotter.Values
	}
	byCfg := map[string]*series{}
	for i, r := range steps {
		t, err := parseF(stepPath, i, r[2])
		if err != nil {
			return nil, err
		}
		w, err := parseF(stepPath, i, r[3])
		if err != nil {
			return nil, err
		}
		s := byCfg[r[0]]
		if s == nil {
			s = &series{}
			byCfg[r[0]] = s
		}
		s.xy = append(s.xy, plotter.XY{X: t, Y: w * 1e3})
		s.waits = append(s.waits, w*1e3)
	}
	order := append([]string(nil), names...)
	for n := range byCfg {
		if !contains(order, n) {
			order = append(order, n)
		}
	}
	p = plot.New()
	p.Title.Text = "Input wait per step"
	p.X.Label.Text = "time since the run began (s)"
	p.Y.Label.Text = "input wait (ms)"
	p.Legend.Top = true
	for i, n := range order {
		s := byCfg[n]
		if s == nil {
			continue
		}
		l, err := plotter.NewLine(s.xy)
		if err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		l.Color = plotutil.Color(i)
		l.Dashes = plotutil.Dashes(i)
		p.Add(l)
		p.Legend.Add(n, l)
	}
	if err := save(p, "input_wait", 6*vg.Inch, 3.5*vg.Inch); err != nil {
		return nil, err
	}
	p = plot.New()
	p.Title.Text = "Input wait distribution"
	p.Y.Label.Text = "input wait per step (ms)"
	var present []string
	for _, n := range order {
		s := byCfg[n]
		if s == nil {
			continue
		}
		b, err := plotter.NewBoxPlot(vg.Points(30), float64(len(present)), s.waits)
		if err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		b.FillColor = plotutil.Color(len(present))
		p.Add(b)
		present = append(present, n)
	}
	p.NominalX(present...)
	if err := save(p, "input_wait_distribution", 5*vg.Inch, 3.5*vg.Inch); err != nil {
		return nil, err
	}

	// GPU utilization over time.
	if len(gpus) == 0 {
		// Not an earlier run's chart beside this run's.
		stale := filepath.Join(dir, "gpu_utilization."+format)
		if err := os.Remove(stale); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("bench: %w", err)
		}
	} else {
		per := map[int]plotter.XYs{}
		for i, r := range gpus {
			t, err := parseF(gpuPath, i, r[0])
			if err != nil {
				return nil, err
			}
			g, err := strconv.Atoi(r[1])
			if err != nil || g < 0 || g > 1<<16 {
				return nil, fmt.Errorf("bench: %s: row %d: bad GPU index %q", gpuPath, i+2, r[1])
			}
			u, err := parseF(gpuPath, i, r[2])
			if err != nil {
				return nil, err
			}
			per[g] = append(per[g], plotter.XY{X: t, Y: u})
		}
		idx := make([]int, 0, len(per))
		for g := range per {
			idx = append(idx, g)
		}
		sort.Ints(idx)
		p = plot.New()
		p.Title.Text = "GPU utilization (nvidia-smi)"
		p.X.Label.Text = "time (s)"
		p.Y.Label.Text = "utilization (%)"
		p.Y.Min, p.Y.Max = 0, 100
		for i, g := range idx {
			l, err := plotter.NewLine(per[g])
			if err != nil {
				return nil, fmt.Errorf("bench: %w", err)
			}
			l.Color = plotutil.Color(i)
			p.Add(l)
			p.Legend.Add("GPU "+strconv.Itoa(g), l)
		}
		if err := save(p, "gpu_utilization", 6*vg.Inch, 3.5*vg.Inch); err != nil {
			return nil, err
		}
	}
	if len(out) == 0 {
		return nil, errors.New("bench: nothing to plot")
	}
	return out, nil
}

func contains(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}
