package split

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/compress"
	"github.com/sluicedata/sluice/format/hashing"
	"github.com/sluicedata/sluice/internal/mmap"
)

// VerifyShard checks split shard k of the dataset in dir, described by
// info: each stored file (compressed form when there is one) exists with
// the size and every digest the index records; compressed files
// decompress to the raw sizes and raw digests; the meta file's offsets
// fit the data file and its config describes the same format and columns
// as the index; and decode accepts every record. It returns the files
// and bytes it read and the first problem found (a *format.CorruptError
// where the data is at fault), nil if the shard is sound.
func VerifyShard(dir string, k int, info *format.ShardInfo, decode func(s *Shard, j int) error, formats ...string) (files int, bytes int64, err error) {
	if err := CheckInfo(info, formats...); err != nil {
		return 0, 0, &format.CorruptError{File: format.IndexFile, Shard: k, Sample: -1, Offset: -1, Reason: err.Error()}
	}
	load := func(raw format.FileInfo, zip *format.FileInfo) ([]byte, func(), error) {
		stored := raw
		if zip != nil {
			stored = *zip
		}
		corrupt := func(f string, args ...any) error {
			return &format.CorruptError{File: stored.Basename, Shard: k, Sample: -1, Offset: -1, Reason: fmt.Sprintf(f, args...)}
		}
		m, err := mmap.Open(filepath.Join(dir, filepath.FromSlash(stored.Basename)))
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil, nil, corrupt("file is missing")
			}
			return nil, nil, fmt.Errorf("shard %d: %w", k, err)
		}
		files++
		bytes += m.Len()
		release := func() { m.Close() }
		b := m.Bytes()
		if b == nil {
			b = []byte{}
		}
		if m.Len() != stored.Bytes {
			release()
			return nil, nil, corrupt("file has %d bytes, index says %d", m.Len(), stored.Bytes)
		}
		if err := checkDigests(k, &stored, b, info.Hashes); err != nil {
			release()
			return nil, nil, err
		}
		if zip == nil {
			return b, release, nil
		}
		defer release()
		if !compress.Valid(info.Family()) {
			return nil, nil, corrupt("unsupported compression %q", info.Compression)
		}
		out, err := compress.Decompress(info.Family(), b, raw.Bytes)
		if err != nil {
			return nil, nil, &format.CorruptError{File: stored.Basename, Shard: k, Sample: -1, Offset: -1, Reason: "decompress", Err: err}
		}
		if int64(len(out)) != raw.Bytes {
			return nil, nil, corrupt("decompresses to %d bytes, index says %d", len(out), raw.Bytes)
		}
		if err := checkDigests(k, &raw, out, info.Hashes); err != nil {
			return nil, nil, err
		}
		return out, func() {}, nil
	}
	data, relData, err := load(info.RawData, info.ZipData)
	if err != nil {
		return files, bytes, err
	}
	defer relData()
	meta, relMeta, err := load(*info.RawMeta, info.ZipMeta)
	if err != nil {
		return files, bytes, err
	}
	defer relMeta()
	s, err := Open(Source{DataFile: info.RawData.Basename, Data: data, MetaFile: info.RawMeta.Basename, Meta: meta}, info, formats...)
	if err != nil {
		return files, bytes, withShard(err, k)
	}
	s.ID = k
	cfg, err := ParseConfig(s.meta.Config)
	if err != nil {
		return files, bytes, &format.CorruptError{File: info.RawMeta.Basename, Shard: k, Sample: -1, Offset: int64(8 + 4*s.meta.N), Reason: "bad config", Err: err}
	}
	if cfg.Format != info.Format || cfg.Newline != info.Newline || cfg.Separator != info.Separator ||
		!slices.Equal(cfg.ColumnNames, info.ColumnNames) || !slices.Equal(cfg.ColumnEncodings, info.ColumnEncodings) ||
		!mapsEqual(cfg.Columns, info.Columns) {
		return files, bytes, &format.CorruptError{File: info.RawMeta.Basename, Shard: k, Sample: -1, Offset: int64(8 + 4*s.meta.N),
			Reason: "config describes a different format or columns than the index"}
	}
	for j := 0; j < s.Len(); j++ {
		if err := decode(s, j); err != nil {
			return files, bytes, withShard(err, k)
		}
	}
	return files, bytes, nil
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func withShard(err error, k int) error {
	var ce *format.CorruptError
	if errors.As(err, &ce) && ce.Shard < 0 {
		ce.Shard = k
	}
	return err
}

// checkDigests compares every digest the index records for fi with b's;
// each algorithm of the shard's list must have one.
func checkDigests(k int, fi *format.FileInfo, b []byte, algos []string) error {
	for _, algo := range algos {
		if _, ok := fi.Hashes[algo]; !ok {
			return &format.CorruptError{File: fi.Basename, Shard: k, Sample: -1, Offset: -1, Reason: fmt.Sprintf("index has no %s digest", algo)}
		}
	}
	names := make([]string, 0, len(fi.Hashes))
	for algo := range fi.Hashes {
		names = append(names, algo)
	}
	slices.Sort(names)
	for _, algo := range names {
		want := fi.Hashes[algo]
		got, err := hashing.Sum(algo, b)
		if err != nil {
			return err
		}
		if got != want {
			return &format.CorruptError{File: fi.Basename, Shard: k, Sample: -1, Offset: -1,
				Reason: fmt.Sprintf("checksum failure: %s is %s, index says %s", algo, got, want)}
		}
	}
	return nil
}
