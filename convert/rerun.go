package convert

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/storage"
)

// ErrOutputExists is returned (wrapped) when the output already holds a
// finished dataset made by another command (other input or settings) or
// by something other than sluice convert.
var ErrOutputExists = errors.New("convert: the output already holds a finished dataset")

// finishedRun handles an output that already holds index.json: a rerun of
// the same command (same fingerprint in the stored report) succeeds with
// the stored report and writes nothing; anything else fails with the
// reason.
func finishedRun(ctx context.Context, out storage.Bucket, r *resolved, fp string, lay *layout) (*Report, error) {
	key := r.prefix + ReportFile
	if r.Part.Count > 1 {
		key = fmt.Sprintf("%s%d.json", ReportPartPrefix, r.Part.Index)
	}
	where := out.URL(r.prefix + format.IndexFile)
	raw, err := storage.ReadAll(ctx, out, key, maxReportBytes)
	if err != nil {
		if errors.Is(err, storage.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s has no %s, so it was not made by this command; choose another output or remove it", ErrOutputExists, where, ReportFile)
		}
		return nil, fmt.Errorf("convert: read the report of the finished dataset: %w", err)
	}
	var rep Report
	if err := json.Unmarshal(raw, &rep); err != nil {
		return nil, fmt.Errorf("%w: %s: its report %s is unreadable (%v); choose another output or remove it", ErrOutputExists, where, out.URL(key), err)
	}
	if rep.Fingerprint == fp {
		return &rep, nil // the same command: already done, nothing rewritten
	}
	var diff []string
	if rep.Input != r.Input {
		diff = append(diff, fmt.Sprintf("input %q (now %q)", rep.Input, r.Input))
	}
	var cols []string
	for _, c := range rep.Columns {
		cols = append(cols, c.Name+":"+c.Encoding)
	}
	slices.Sort(cols)
	var now []string
	for i := range lay.cols {
		now = append(now, lay.cols[i].name+":"+lay.cols[i].enc.String())
	}
	slices.Sort(now)
	if !slices.Equal(cols, now) {
		diff = append(diff, fmt.Sprintf("columns %s (now %s)", strings.Join(cols, ","), strings.Join(now, ",")))
	}
	if rep.Compression != r.Compression {
		diff = append(diff, fmt.Sprintf("compression %q (now %q)", rep.Compression, r.Compression))
	}
	if !slices.Equal(rep.Hashes, r.hashes) {
		diff = append(diff, fmt.Sprintf("hashes %v (now %v)", rep.Hashes, r.hashes))
	}
	if rep.SizeLimit != r.sizeLimit {
		diff = append(diff, fmt.Sprintf("size limit %d (now %d)", rep.SizeLimit, r.sizeLimit))
	}
	if len(diff) == 0 {
		diff = append(diff, "other settings (fetch, image, null or invalid-record options)")
	}
	return nil, fmt.Errorf("%w: %s was converted with %s; rerun the same command, choose another output or remove it", ErrOutputExists, where, strings.Join(diff, "; "))
}
