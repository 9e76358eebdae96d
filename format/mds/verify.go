package mds

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/compress"
	"github.com/sluicedata/sluice/format/hashing"
	"github.com/sluicedata/sluice/format/jsonl"
	"github.com/sluicedata/sluice/format/xsv"
	"github.com/sluicedata/sluice/internal/mmap"
)

// VerifyStats summarises a Verify run.
type VerifyStats struct {
	// Shards and Samples checked (as the index declares them).
	Shards, Samples int64
	// Files read and their total stored Bytes.
	Files int
	Bytes int64
	// Problems reported.
	Problems int
}

// Verify checks the dataset in the local directory dir: index.json parses;
// every stored shard file exists with the size and every digest the index
// records; compressed shards decompress to the raw size and raw digests;
// each shard's header and offset table agree with the index; and every
// sample of every column decodes. Each problem is passed to problem (a
// *format.CorruptError naming file, shard, sample and what is wrong, or an
// I/O error); checking continues with the next shard. The returned error
// is non-nil only when verification could not run at all (unreadable or
// corrupt index, cancelled context).
func Verify(ctx context.Context, dir string, problem func(error)) (VerifyStats, error) {
	var st VerifyStats
	b, err := os.ReadFile(filepath.Join(dir, format.IndexFile))
	if err != nil {
		return st, fmt.Errorf("mds: verify: %w", err)
	}
	idx, err := format.ParseIndex(b)
	if err != nil {
		return st, fmt.Errorf("mds: verify: %w", err)
	}
	report := func(err error) {
		st.Problems++
		problem(err)
	}
	for k := range idx.Shards {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		info := &idx.Shards[k]
		st.Shards++
		st.Samples += int64(info.Samples)
		switch info.Format {
		case "mds":
		case jsonl.Format, xsv.CSV, xsv.TSV, xsv.XSV:
			// MosaicML's split formats (spec 7) are verified by their packages.
			verify := xsv.VerifyShard
			if info.Format == jsonl.Format {
				verify = jsonl.VerifyShard
			}
			files, n, err := verify(dir, k, info)
			st.Files += files
			st.Bytes += n
			if err != nil {
				report(err)
			}
			continue
		default:
			report(&format.CorruptError{File: info.RawData.Basename, Shard: k, Sample: -1, Offset: -1,
				Reason: fmt.Sprintf("format %q cannot be verified by the mds verifier", info.Format)})
			continue
		}
		if err := VerifyShard(dir, k, info, &st); err != nil {
			report(err)
		}
	}
	return st, nil
}

// VerifyShard checks MDS shard k of the dataset in dir, described by info,
// as Verify does, adding the files and bytes it read to st. It returns the
// first problem found, nil if the shard is sound.
func VerifyShard(dir string, k int, info *format.ShardInfo, st *VerifyStats) error {
	corrupt := func(file string, sample int, format_ string, args ...any) error {
		return &format.CorruptError{File: file, Shard: k, Sample: sample, Offset: -1, Reason: fmt.Sprintf(format_, args...)}
	}
	if info.Format != "mds" {
		return corrupt(info.RawData.Basename, -1, "format %q is not mds", info.Format)
	}
	for _, e := range info.ColumnEncodings {
		if _, err := ParseEncoding(e); err != nil {
			return &format.CorruptError{File: format.IndexFile, Shard: k, Sample: -1, Offset: -1, Err: err}
		}
	}
	stored := info.RawData
	if info.ZipData != nil {
		stored = *info.ZipData
	}
	path := filepath.Join(dir, filepath.FromSlash(stored.Basename))
	m, err := mmap.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return corrupt(stored.Basename, -1, "file is missing")
		}
		return fmt.Errorf("shard %d: %w", k, err)
	}
	defer m.Close()
	st.Files++
	st.Bytes += m.Len()
	if m.Len() != stored.Bytes {
		return corrupt(stored.Basename, -1, "file has %d bytes, index says %d", m.Len(), stored.Bytes)
	}
	if err := CheckDigests(stored, m.Bytes(), k); err != nil {
		return err
	}
	raw := m.Bytes()
	if info.ZipData != nil {
		if !compress.Valid(info.Family()) {
			return corrupt(stored.Basename, -1, "unsupported compression %q", info.Compression)
		}
		raw, err = compress.Decompress(info.Family(), m.Bytes(), info.RawData.Bytes)
		if err != nil {
			return &format.CorruptError{File: stored.Basename, Shard: k, Sample: -1, Offset: -1, Reason: "decompress", Err: err}
		}
		if int64(len(raw)) != info.RawData.Bytes {
			return corrupt(stored.Basename, -1, "decompresses to %d bytes, index says %d", len(raw), info.RawData.Bytes)
		}
		if err := CheckDigests(info.RawData, raw, k); err != nil {
			return err
		}
	}
	s, err := OpenBytes(raw, info)
	if err != nil {
		return withShard(err, k)
	}
	s.id = k
	// The header's own copy of the configuration must describe the same
	// columns as the index (MosaicML ignores it, but a mismatch means the
	// file belongs to another dataset).
	hlen := 8 + 4*int64(s.n)
	first := int64(binary.LittleEndian.Uint32(s.offs))
	cfg, err := parseConfig(raw[hlen:first])
	if err != nil {
		return &format.CorruptError{File: info.RawData.Basename, Shard: k, Sample: -1, Offset: hlen, Reason: "bad header config", Err: err}
	}
	if strings.Join(cfg.ColumnNames, "\x00") != strings.Join(info.ColumnNames, "\x00") ||
		strings.Join(cfg.ColumnEncodings, "\x00") != strings.Join(info.ColumnEncodings, "\x00") {
		return &format.CorruptError{File: info.RawData.Basename, Shard: k, Sample: -1, Offset: hlen,
			Reason: fmt.Sprintf("header columns %v %v differ from the index's %v %v", cfg.ColumnNames, cfg.ColumnEncodings, info.ColumnNames, info.ColumnEncodings)}
	}
	var cols [][]byte
	for j := 0; j < s.Len(); j++ {
		rec, err := s.Record(j)
		if err != nil {
			return err
		}
		if cols, err = s.Columns(j, rec, cols[:0]); err != nil {
			return err
		}
		for c, b := range cols {
			if _, err := s.cols[c].Decode(b); err != nil {
				return &format.CorruptError{File: info.RawData.Basename, Shard: k, Sample: j, Offset: -1,
					Reason: fmt.Sprintf("column %q (%s)", s.names[c], s.cols[c]), Err: err}
			}
		}
	}
	return nil
}

// CheckDigests compares every digest fi records with the digest of b (the
// file's contents); k is the shard for the error.
func CheckDigests(fi format.FileInfo, b []byte, k int) error {
	algos := make([]string, 0, len(fi.Hashes))
	for a := range fi.Hashes {
		algos = append(algos, a)
	}
	sort.Strings(algos)
	for _, a := range algos {
		got, err := hashing.Sum(a, b)
		if err != nil {
			return &format.CorruptError{File: fi.Basename, Shard: k, Sample: -1, Offset: -1, Reason: fmt.Sprintf("unknown hash algorithm %q", a)}
		}
		if got != fi.Hashes[a] {
			return &format.CorruptError{File: fi.Basename, Shard: k, Sample: -1, Offset: -1,
				Reason: fmt.Sprintf("%s digest is %s, index says %s", a, got, fi.Hashes[a])}
		}
	}
	return nil
}
