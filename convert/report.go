package convert

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/sluicedata/sluice/convert/input"
	"github.com/sluicedata/sluice/storage"
)

// ReportFile is the name of the conversion report next to index.json.
// Parts write theirs at the output root as ReportPartPrefix + "I.json"
// (outside the part directories, which hold only the sub-datasets), and
// each finishing part rewrites ReportFile with the figures of every part
// finished so far.
const (
	ReportFile       = "convert-report.json"
	ReportPartPrefix = "convert-report.part-"
	maxReportBytes   = 64 << 20
	// LabelsFile maps class names to labels for image folders, next to
	// index.json: {"cat": 0, "dog": 1}.
	LabelsFile = "labels.json"
)

// Report is the quality gate's record of a conversion, written as JSON
// next to the index.
type Report struct {
	// Input, Output, Part, Columns, Compression, Hashes and SizeLimit
	// record the conversion's settings (Options, with the columns as
	// resolved from the input).
	Input       string         `json:"input"`
	Output      string         `json:"output"`
	Part        *input.Part    `json:"part,omitempty"`
	Columns     []input.Column `json:"columns"`
	Compression string         `json:"compression,omitempty"`
	Hashes      []string       `json:"hashes,omitempty"`
	SizeLimit   int64          `json:"size_limit"`
	Stats
	// FetchSuccessRate is FetchSucceeded/FetchAttempted (1 with no
	// fetches).
	FetchSuccessRate float64 `json:"fetch_success_rate"`
	// RecordSuccessRate is the share of input records not skipped (1 with
	// no input), whatever skipped the others (failed fetches, invalid
	// values, nulls, files that are no images).
	RecordSuccessRate float64 `json:"record_success_rate"`
	// MinSuccessRate is the required fetch and record success rate (0:
	// none).
	MinSuccessRate float64 `json:"min_success_rate,omitempty"`
	// Passed is false when the fetch or the record success rate is below
	// the minimum; the index is then not written.
	Passed bool `json:"passed"`
	// Seconds is the conversion time, summed over resumed runs.
	Seconds float64 `json:"seconds"`
	// SamplesPerSec and MBPerSec are SamplesOut and RawBytes (in MB of
	// 10^6 bytes) per second of Seconds.
	SamplesPerSec float64 `json:"samples_per_sec"`
	MBPerSec      float64 `json:"mb_per_sec"`
	// ResumedShards counts shards taken over from an interrupted run.
	ResumedShards int `json:"resumed_shards,omitempty"`
	// Labels maps each class of an image folder to its label (also
	// written as LabelsFile next to the index).
	Labels map[string]int64 `json:"labels,omitempty"`
	// Fingerprint identifies the settings and input that made the output;
	// a rerun with the same ones finds the dataset finished and changes
	// nothing.
	Fingerprint string `json:"fingerprint,omitempty"`
	// Parts holds each part's report in a combined report.
	Parts []*Report `json:"parts,omitempty"`
}

func (r *Report) finish() {
	r.FetchSuccessRate = 1
	if r.FetchAttempted > 0 {
		r.FetchSuccessRate = float64(r.FetchSucceeded) / float64(r.FetchAttempted)
	}
	r.RecordSuccessRate = 1
	if r.SamplesIn > 0 {
		r.RecordSuccessRate = float64(r.SamplesIn-r.skipped()) / float64(r.SamplesIn)
	}
	r.Passed = r.FetchSuccessRate >= r.MinSuccessRate && r.RecordSuccessRate >= r.MinSuccessRate
	if r.Seconds > 0 {
		r.SamplesPerSec = float64(r.SamplesOut) / r.Seconds
		r.MBPerSec = float64(r.RawBytes) / 1e6 / r.Seconds
	}
}

// Summary writes a readable account of the report.
func (r *Report) Summary(w io.Writer) error {
	var b strings.Builder
	status := "PASSED"
	if n := r.skipped(); n > 0 {
		status = fmt.Sprintf("PASSED with %d of %d records skipped (%.2f%% kept)", n, r.SamplesIn, 100*r.RecordSuccessRate)
	}
	if !r.Passed {
		status = fmt.Sprintf("FAILED (fetch success %.2f%%, records kept %.2f%%; the minimum is %.2f%%)", 100*r.FetchSuccessRate, 100*r.RecordSuccessRate, 100*r.MinSuccessRate)
	}
	fmt.Fprintf(&b, "convert %s -> %s: %s\n", r.Input, r.Output, status)
	if r.Part != nil {
		fmt.Fprintf(&b, "  part:      %d of %d\n", r.Part.Index, r.Part.Count)
	}
	if len(r.Parts) > 0 {
		fmt.Fprintf(&b, "  parts:     %d finished\n", len(r.Parts))
	}
	fmt.Fprintf(&b, "  samples:   %d in, %d out, %d skipped\n", r.SamplesIn, r.SamplesOut, r.skipped())
	if len(r.Failures) > 0 {
		reasons := make([]string, 0, len(r.Failures))
		for k := range r.Failures {
			reasons = append(reasons, k)
		}
		sort.Strings(reasons)
		for _, k := range reasons {
			fmt.Fprintf(&b, "    %-12s %d\n", k, r.Failures[k])
		}
	}
	if len(r.Nulls) > 0 {
		cols := make([]string, 0, len(r.Nulls))
		for k := range r.Nulls {
			cols = append(cols, k)
		}
		sort.Strings(cols)
		b.WriteString("  nulls:    ")
		for _, k := range cols {
			fmt.Fprintf(&b, " %s %d", k, r.Nulls[k])
		}
		b.WriteString("\n")
	}
	if r.Tokens > 0 {
		fmt.Fprintf(&b, "  tokens:    %d", r.Tokens)
		if r.TokensDropped > 0 {
			fmt.Fprintf(&b, " (%d dropped with the last partial block)", r.TokensDropped)
		}
		b.WriteString("\n")
	}
	if r.FetchAttempted > 0 {
		fmt.Fprintf(&b, "  fetches:   %d of %d succeeded (%.2f%%)\n", r.FetchSucceeded, r.FetchAttempted, 100*r.FetchSuccessRate)
	}
	fmt.Fprintf(&b, "  shards:    %d (%s raw, %s stored)\n", r.Shards, human(r.RawBytes), human(r.StoredBytes))
	fmt.Fprintf(&b, "  time:      %.2fs, %.0f samples/s, %.1f MB/s", r.Seconds, r.SamplesPerSec, r.MBPerSec)
	if r.ResumedShards > 0 {
		fmt.Fprintf(&b, " (resumed after %d shards)", r.ResumedShards)
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func human(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

func writeReport(ctx context.Context, b storage.Bucket, key string, r *Report) error {
	raw, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("convert: report: %w", err)
	}
	return putObject(ctx, b, key, append(raw, '\n'), "application/json")
}

// combineReports reads every part report at the output root and writes
// the combined ReportFile. It returns the combined report.
func combineReports(ctx context.Context, b storage.Bucket, count int) (*Report, error) {
	var parts []*Report
	err := b.List(ctx, ReportPartPrefix, func(o storage.ObjectInfo) error {
		raw, err := storage.ReadAll(ctx, b, o.Key, maxReportBytes)
		if err != nil {
			return err
		}
		var r Report
		if err := json.Unmarshal(raw, &r); err != nil {
			return fmt.Errorf("convert: %s: %w", b.URL(o.Key), err)
		}
		if r.Part != nil && r.Part.Count == count {
			parts = append(parts, &r)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("convert: combine reports: %w", err)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i].Part.Index < parts[j].Part.Index })
	c := &Report{Stats: Stats{Failures: map[string]int64{}}, Parts: parts}
	for _, p := range parts {
		c.Labels = p.Labels
		c.Input, c.Output, c.Columns = p.Input, strings.TrimSuffix(p.Output, "/"+PartDir(p.Part.Index, count)), p.Columns
		c.Compression, c.Hashes, c.SizeLimit, c.MinSuccessRate = p.Compression, p.Hashes, p.SizeLimit, p.MinSuccessRate
		c.SamplesIn += p.SamplesIn
		c.SamplesOut += p.SamplesOut
		for k, v := range p.Failures {
			c.Failures[k] += v
		}
		for k, v := range p.Nulls {
			if c.Nulls == nil {
				c.Nulls = map[string]int64{}
			}
			c.Nulls[k] += v
		}
		c.Tokens += p.Tokens
		c.TokensDropped += p.TokensDropped
		c.FetchAttempted += p.FetchAttempted
		c.FetchSucceeded += p.FetchSucceeded
		c.Shards += p.Shards
		c.RawBytes += p.RawBytes
		c.StoredBytes += p.StoredBytes
		c.Seconds = max(c.Seconds, p.Seconds) // parts run side by side
	}
	c.finish()
	for _, p := range parts {
		c.Passed = c.Passed && p.Passed
	}
	if err := writeReport(ctx, b, ReportFile, c); err != nil {
		return nil, err
	}
	return c, nil
}
