package cli

import (
	"context"
	"fmt"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/jsonl"
	"github.com/sluicedata/sluice/format/mds"
	"github.com/sluicedata/sluice/format/wds"
	"github.com/sluicedata/sluice/format/xsv"
)

// verifyDataset checks every shard of the dataset d, whatever its format,
// through the format's own VerifyShard (mds, jsonl or xsv): each stored
// file's size and digests, the decompressed form's raw digests, the shard's
// layout against the index, and every sample decoded. Each problem is passed
// to problem and checking goes on with the next shard; the error is non-nil
// only when the check could not run (unreadable index, failed download,
// cancelled context).
func verifyDataset(ctx context.Context, d *dataset, problem func(error)) (mds.VerifyStats, error) {
	var st mds.VerifyStats
	idx, err := d.readIndex(ctx)
	if err != nil {
		return st, err
	}
	err = d.eachShard(ctx, idx, 0, len(idx.Shards), func(k int, dir string, fetchErr error) error {
		if fetchErr != nil {
			return fmt.Errorf("shard %d: %w", k, fetchErr)
		}
		info := &idx.Shards[k]
		st.Shards++
		st.Samples += int64(info.Samples)
		if err := verifyShard(dir, k, info, &st); err != nil {
			st.Problems++
			problem(err)
		}
		return nil
	})
	return st, err
}

// verifyShard checks shard k, described by info, of the dataset in dir in
// its own format, adding the files and bytes read to st.
func verifyShard(dir string, k int, info *format.ShardInfo, st *mds.VerifyStats) error {
	var verify func(dir string, k int, info *format.ShardInfo) (int, int64, error)
	switch info.Format {
	case "mds":
		return mds.VerifyShard(dir, k, info, st)
	case jsonl.Format:
		verify = jsonl.VerifyShard
	case xsv.CSV, xsv.TSV, xsv.XSV:
		verify = xsv.VerifyShard
	case wds.Format:
		verify = wds.VerifyShard
	default:
		return &format.CorruptError{File: info.RawData.Basename, Shard: k, Sample: -1, Offset: -1,
			Reason: fmt.Sprintf("unknown shard format %q", info.Format)}
	}
	files, n, err := verify(dir, k, info)
	st.Files += files
	st.Bytes += n
	return err
}
