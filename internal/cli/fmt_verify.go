package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/jsonl"
	"github.com/sluicedata/sluice/format/mds"
	"github.com/sluicedata/sluice/format/xsv"
	"github.com/sluicedata/sluice/internal/mmap"
)

// verifyDataset checks every shard of the dataset in dir, whatever its
// format: MDS shards through mds.VerifyShard; JSON-lines and CSV/TSV/XSV
// shards by checking each stored file's size and digests, then opening the
// shard (its own validation) and decoding every sample.
func verifyDataset(ctx context.Context, dir string, problem func(error)) (mds.VerifyStats, error) {
	var st mds.VerifyStats
	b, err := os.ReadFile(filepath.Join(dir, format.IndexFile))
	if err != nil {
		return st, err
	}
	idx, err := format.ParseIndex(b)
	if err != nil {
		return st, err
	}
	for k := range idx.Shards {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		info := &idx.Shards[k]
		st.Shards++
		st.Samples += int64(info.Samples)
		var err error
		switch info.Format {
		case "mds":
			err = mds.VerifyShard(dir, k, info, &st)
		case "json", "csv", "tsv", "xsv":
			err = verifySplitShard(dir, k, info, &st)
		default:
			err = &format.CorruptError{File: info.RawData.Basename, Shard: k, Sample: -1, Offset: -1,
				Reason: fmt.Sprintf("unknown shard format %q", info.Format)}
		}
		if err != nil {
			st.Problems++
			problem(err)
		}
	}
	return st, nil
}

// sampler is what the split formats' shards offer.
type sampler interface {
	Len() int
	Sample(j int) (format.Sample, error)
	Close() error
}

func verifySplitShard(dir string, k int, info *format.ShardInfo, st *mds.VerifyStats) error {
	for _, fi := range info.Files() {
		m, err := mmap.Open(filepath.Join(dir, filepath.FromSlash(fi.Basename)))
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return &format.CorruptError{File: fi.Basename, Shard: k, Sample: -1, Offset: -1, Reason: "file is missing"}
			}
			return fmt.Errorf("shard %d: %w", k, err)
		}
		st.Files++
		st.Bytes += m.Len()
		err = nil
		if m.Len() != fi.Bytes {
			err = &format.CorruptError{File: fi.Basename, Shard: k, Sample: -1, Offset: -1,
				Reason: fmt.Sprintf("file has %d bytes, index says %d", m.Len(), fi.Bytes)}
		} else {
			err = mds.CheckDigests(fi, m.Bytes(), k)
		}
		m.Close()
		if err != nil {
			return err
		}
	}
	var s sampler
	var err error
	if info.Format == "json" {
		var js *jsonl.Shard
		if js, err = jsonl.OpenDir(dir, info); err == nil {
			js.SetID(k)
			s = js
		}
	} else {
		var xs *xsv.Shard
		if xs, err = xsv.OpenDir(dir, info); err == nil {
			xs.SetID(k)
			s = xs
		}
	}
	if err != nil {
		return err
	}
	defer s.Close()
	for j := 0; j < s.Len(); j++ {
		if _, err := s.Sample(j); err != nil {
			return err
		}
	}
	return nil
}
