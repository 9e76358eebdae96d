package cli

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"path"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/jsonl"
	"github.com/sluicedata/sluice/format/mds"
	"github.com/sluicedata/sluice/format/wds"
	"github.com/sluicedata/sluice/format/xsv"
)

func newDumpCommand(e *env) *cobra.Command {
	var from, count int64
	var raw bool
	var sf storeFlags
	cmd := &cobra.Command{
		Use:   "dump DATASET",
		Short: "Print samples as canonical JSON lines",
		Long: `Print samples of the dataset at DATASET (a local directory or a store URL:
s3://, gs://, az://, https://, file://), one JSON line each, in the
canonical form of the reference fixtures' expected.jsonl:

  {"cols": {NAME: {"raw_len": N, "raw_sha256": HEX, "v": VALUE}}, "i": I, "shard": K}

so that any dataset can be compared line by line with what MosaicML reads.
Shards of every MosaicML format (mds, json, csv, tsv, xsv) are dumped, in
global sample order, even when one index mixes them. JPEG pixels are what
Go decodes. pkl values are never unpickled; they are shown as
{"pkl_b64": BASE64}.

The shards of a remote dataset are downloaded into a temporary directory a
few at a time, and removed once dumped.

--raw prints, for MDS shards, each column's stored bytes instead (after
decompression, before decoding): {"cols": {NAME: {"b64": BASE64}}, "i": I,
"shard": K}, to feed a writer the exact bytes a dataset holds.`,
		Args: cobra.ExactArgs(1),
		RunE: storeRunE(&sf, func(cmd *cobra.Command, args []string) error {
			if from < 0 {
				return fmt.Errorf("dump: --from must be >= 0, got %d", from)
			}
			if count < -1 {
				return fmt.Errorf("dump: --count must be >= 0 (or -1 for all), got %d", count)
			}
			out := bufio.NewWriterSize(e.stdout, 1<<16)
			err := runDump(cmd.Context(), e, args[0], from, count, raw, out)
			return errors.Join(err, out.Flush())
		}),
	}
	addStoreFlags(cmd, &sf)
	cmd.Flags().Int64Var(&from, "from", 0, "first global sample index")
	cmd.Flags().Int64Var(&count, "count", -1, "number of samples (-1: to the end)")
	cmd.Flags().BoolVar(&raw, "raw", false, "print each MDS column's stored bytes (base64) instead of its value")
	return cmd
}

// runDump writes the canonical lines of samples [from, from+count) (to the
// end when count is negative) of the dataset arg to w.
func runDump(ctx context.Context, e *env, arg string, from, count int64, raw bool, w io.Writer) error {
	d, err := openDataset(ctx, e, arg)
	if err != nil {
		return fmt.Errorf("dump: %w", err)
	}
	defer d.Close()
	idx, err := d.readIndex(ctx)
	if err != nil {
		return fmt.Errorf("dump: %w", err)
	}
	off := shardOffsets(idx)
	end := off[len(off)-1]
	if count >= 0 && from+count < end {
		end = from + count
	}
	if from >= end {
		return nil
	}
	first, last := locateShard(off, from), locateShard(off, end-1)+1
	var line []byte
	err = d.eachShard(ctx, idx, first, last, func(k int, dir string, fetchErr error) error {
		if fetchErr != nil {
			return fetchErr
		}
		sd, err := openDumper(dir, k, &idx.Shards[k], raw)
		if err != nil {
			return err
		}
		defer sd.Close()
		for i := max(from, off[k]); i < min(end, off[k+1]); i++ {
			if err := ctx.Err(); err != nil {
				return err
			}
			if line, err = sd.appendDump(line[:0], i, int(i-off[k])); err != nil {
				return err
			}
			line = append(line, '\n')
			if _, err := w.Write(line); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("dump: %w", err)
	}
	return nil
}

// dumper appends the canonical lines of one opened shard's samples.
type dumper struct {
	// appendDump appends sample j's line, whose global index is i.
	appendDump func(dst []byte, i int64, j int) ([]byte, error)
	io.Closer
}

// openDumper opens shard k, described by info, of the dataset in dir, in
// its own format.
func openDumper(dir string, k int, info *format.ShardInfo, raw bool) (*dumper, error) {
	if raw && info.Format != "mds" {
		return nil, fmt.Errorf("--raw dumps MDS shards; shard %d is %s", k, info.Format)
	}
	switch info.Format {
	case "mds":
		// A Reader over this one shard: it maps the raw file or inflates
		// the compressed one, and surfaces pkl values as bytes. It numbers
		// the shard 0 in its errors; each of them concerns shard k.
		r, err := mds.NewReader(dir, &format.Index{Shards: []format.ShardInfo{*info}}, &mds.Options{AllowUnsafeTypes: true})
		if err != nil {
			return nil, renumberShard(err, k)
		}
		s, err := r.Shard(0)
		if err != nil {
			r.Close()
			return nil, renumberShard(err, k)
		}
		if raw {
			return &dumper{Closer: r, appendDump: func(dst []byte, i int64, j int) ([]byte, error) {
				b, err := appendRawColumns(dst, i, k, s, j)
				return b, renumberShard(err, k)
			}}, nil
		}
		return &dumper{Closer: r, appendDump: func(dst []byte, i int64, j int) ([]byte, error) {
			b, err := mds.AppendDump(dst, i, k, s, j)
			return b, renumberShard(err, k)
		}}, nil
	case jsonl.Format:
		s, err := jsonl.OpenDir(dir, info)
		if err != nil {
			return nil, renumberShard(err, k)
		}
		s.SetID(k)
		return &dumper{Closer: s, appendDump: func(dst []byte, i int64, j int) ([]byte, error) {
			return jsonl.AppendDump(dst, i, k, s, j)
		}}, nil
	case xsv.CSV, xsv.TSV, xsv.XSV:
		s, err := xsv.OpenDir(dir, info)
		if err != nil {
			return nil, renumberShard(err, k)
		}
		s.SetID(k)
		return &dumper{Closer: s, appendDump: func(dst []byte, i int64, j int) ([]byte, error) {
			return xsv.AppendDump(dst, i, k, s, j)
		}}, nil
	case wds.Format:
		// WebDataset's own line: {"fields", "key", "url"} (see wds.AppendDump).
		f, err := wds.OpenFile(filepath.Join(dir, filepath.FromSlash(info.RawData.Basename)), info, nil)
		if err != nil {
			return nil, err
		}
		url := path.Base(info.RawData.Basename)
		return &dumper{Closer: f, appendDump: func(dst []byte, _ int64, j int) ([]byte, error) {
			return f.AppendDump(dst, j, url)
		}}, nil
	default:
		return nil, &format.CorruptError{File: info.RawData.Basename, Shard: k, Sample: -1, Offset: -1,
			Reason: fmt.Sprintf("unknown shard format %q", info.Format)}
	}
}

// renumberShard sets shard k in the *format.CorruptError err carries, for
// errors from a reader that sees shard k alone.
func renumberShard(err error, k int) error {
	var ce *format.CorruptError
	if errors.As(err, &ce) {
		ce.Shard = k
	}
	return err
}

// appendRawColumns appends sample j of s (global index i, shard k) as
// {"cols": {NAME: {"b64": ...}}, "i": I, "shard": K}.
func appendRawColumns(dst []byte, i int64, k int, s *mds.Shard, j int) ([]byte, error) {
	rec, err := s.Record(j)
	if err != nil {
		return dst, err
	}
	cols, err := s.Columns(j, rec, nil)
	if err != nil {
		return dst, err
	}
	dst = append(dst, `{"cols": {`...)
	for c, name := range s.ColumnNames() {
		if c > 0 {
			dst = append(dst, ", "...)
		}
		dst = format.AppendJSONString(dst, name)
		dst = append(dst, `: {"b64": "`...)
		dst = base64.StdEncoding.AppendEncode(dst, cols[c])
		dst = append(dst, `"}`...)
	}
	return fmt.Appendf(dst, `}, "i": %d, "shard": %d}`, i, k), nil
}
