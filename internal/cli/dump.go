package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/jsonl"
	"github.com/sluicedata/sluice/format/mds"
	"github.com/sluicedata/sluice/format/xsv"
)

func newDumpCommand(e *env) *cobra.Command {
	var from, count int64
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
few at a time, and removed once dumped.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if from < 0 {
				return fmt.Errorf("dump: --from must be >= 0")
			}
			out := bufio.NewWriterSize(e.stdout, 1<<16)
			err := runDump(cmd.Context(), e, args[0], from, count, out)
			return errors.Join(err, out.Flush())
		},
	}
	cmd.Flags().Int64Var(&from, "from", 0, "first global sample index")
	cmd.Flags().Int64Var(&count, "count", -1, "number of samples (-1: to the end)")
	return cmd
}

// runDump writes the canonical lines of samples [from, from+count) (to the
// end when count is negative) of the dataset arg to w.
func runDump(ctx context.Context, e *env, arg string, from, count int64, w io.Writer) error {
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
		sd, err := openDumper(dir, k, &idx.Shards[k])
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
func openDumper(dir string, k int, info *format.ShardInfo) (*dumper, error) {
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
