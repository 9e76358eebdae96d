package bench

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sluicedata/sluice/internal/atomicfile"
)

// CSV file names under the output directory.
const (
	SummaryFile = "summary.csv"
	StepsFile   = "steps.csv"
	GPUFile     = "gpu.csv"
)

var (
	summaryHeader = []string{"config", "samples", "steps", "wall_s", "time_to_first_batch_s", "mean_input_wait_s", "input_wait_fraction", "samples_per_s", "bytes_fetched"}
	stepsHeader   = []string{"config", "step", "t_s", "input_wait_s", "samples"}
	gpuHeader     = []string{"t_s", "gpu", "utilization_pct", "memory_mib"}
)

func f64(x float64) string { return strconv.FormatFloat(x, 'f', 6, 64) }

func writeCSVs(dir string, r *Result) ([]string, error) {
	var files []string
	write := func(name string, header []string, rows [][]string) error {
		var b bytes.Buffer
		w := csv.NewWriter(&b)
		_ = w.Write(header)
		_ = w.WriteAll(rows)
		p := filepath.Join(dir, name)
		if err := atomicfile.WriteFile(p, 0o644, b.Bytes()); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		files = append(files, p)
		return nil
	}
	var rows [][]string
	for _, s := range r.Runs {
		rows = append(rows, []string{s.Config, strconv.FormatInt(s.Samples, 10), strconv.Itoa(s.Steps),
			f64(s.Wall.Seconds()), f64(s.FirstBatch.Seconds()), f64(s.MeanWait.Seconds()),
			f64(s.InputWaitFraction), f64(s.SamplesPerSecond), strconv.FormatInt(s.BytesFetched, 10)})
	}
	if err := write(SummaryFile, summaryHeader, rows); err != nil {
		return nil, err
	}
	rows = rows[:0]
	for _, s := range r.Steps {
		rows = append(rows, []string{s.Config, strconv.Itoa(s.Step), f64(s.At.Seconds()), f64(s.Wait.Seconds()), strconv.Itoa(s.Samples)})
	}
	if err := write(StepsFile, stepsHeader, rows); err != nil {
		return nil, err
	}
	if len(r.GPU) == 0 {
		// An earlier run's readings in the same directory would be
		// plotted as this run's.
		if err := os.Remove(filepath.Join(dir, GPUFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("bench: %w", err)
		}
	} else {
		rows = rows[:0]
		for _, g := range r.GPU {
			rows = append(rows, []string{f64(g.At.Seconds()), strconv.Itoa(g.GPU), f64(g.Util), f64(g.MemMiB)})
		}
		if err := write(GPUFile, gpuHeader, rows); err != nil {
			return nil, err
		}
	}
	return files, nil
}

// maxCSV bounds a CSV file Plot reads.
const maxCSV = 256 << 20

// readCSV reads a CSV file with the given header; a missing file gives
// nil rows and no error when optional.
func readCSV(path string, header []string, optional bool) ([][]string, error) {
	f, err := os.Open(path)
	if err != nil {
		if optional && errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("bench: %w (sluice bench --out DIR writes it)", err)
		}
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer f.Close()
	r := csv.NewReader(io.LimitReader(f, maxCSV))
	r.FieldsPerRecord = len(header)
	rows, err := r.ReadAll()
	if err != nil {
		if errors.Is(err, csv.ErrFieldCount) {
			return nil, fmt.Errorf("bench: %s: %w (sluice bench writes %d columns: %s)", path, err, len(header),
				strings.Join(header, ","))
		}
		return nil, fmt.Errorf("bench: %s: %w", path, err)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("bench: %s: empty (no header)", path)
	}
	for i, h := range header {
		if rows[0][i] != h {
			return nil, fmt.Errorf("bench: %s: column %d is %q, want %q", path, i+1, rows[0][i], h)
		}
	}
	return rows[1:], nil
}

// maxFigure bounds the magnitude of a number the charts take (seconds,
// samples/s, percent): beyond it their axis arithmetic overflows.
const maxFigure = 1e12

// parseF parses a number of row (0: the first after the header) of path;
// NaN, infinities and magnitudes beyond maxFigure (which the charts cannot
// place) are refused with the row that holds them.
func parseF(path string, row int, s string) (float64, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("bench: %s: row %d: %q is not a finite number", path, row+2, s)
	}
	if math.Abs(v) > maxFigure {
		return 0, fmt.Errorf("bench: %s: row %d: %q is out of range (magnitude above %g)", path, row+2, s, float64(maxFigure))
	}
	return v, nil
}

// WriteCSV writes r's summary.csv, steps.csv and (when r has GPU readings)
// gpu.csv to dir, the files Plot reads, as Run does; a gpu.csv already
// there is removed when r has none. It returns the files written.
func WriteCSV(dir string, r *Result) ([]string, error) { return writeCSVs(dir, r) }
