package wds

import (
	"bytes"
	"fmt"
	"path/filepath"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/hashing"
)

// VerifyShard checks tar shard k of the dataset in dir against its index
// entry: the file's size and sample count, its header digest, every other
// digest the entry lists, and that every sample's fields lie inside the
// file. It returns the files and bytes it read; problems are errors
// matching format.ErrCorrupt that name the shard.
func VerifyShard(dir string, k int, info *format.ShardInfo) (int, int64, error) {
	path := filepath.Join(dir, filepath.FromSlash(info.RawData.Basename))
	f, err := OpenFile(path, info, nil)
	if err != nil {
		return 0, 0, shardErr(k, info, err)
	}
	defer f.Close()
	data := f.Bytes()
	for name, want := range info.RawData.Hashes {
		var got string
		switch {
		case headerHash(name) != nil:
			s, err := scan(bytes.NewReader(data), nil, name)
			if err != nil {
				return 1, int64(len(data)), shardErr(k, info, err)
			}
			got = s.Digest
		case hashing.Valid(name):
			if got, err = hashing.Sum(name, data); err != nil {
				return 1, int64(len(data)), err
			}
		default:
			continue
		}
		if got != want {
			return 1, int64(len(data)), &format.CorruptError{File: info.RawData.Basename, Shard: k, Sample: -1, Offset: -1,
				Reason: fmt.Sprintf("%s digest %s, the index says %s", name, got, want)}
		}
	}
	for j := range f.Len() {
		spans, _ := f.Fields(j)
		for _, sp := range spans {
			if sp.Offset < 0 || sp.Size < 0 || sp.Offset+sp.Size > int64(len(data)) {
				return 1, int64(len(data)), &format.CorruptError{File: info.RawData.Basename, Shard: k, Sample: j, Offset: sp.Offset,
					Reason: fmt.Sprintf("field %q runs past the end of the file", sp.Name)}
			}
		}
	}
	return 1, int64(len(data)), nil
}

// shardErr locates err in shard k.
func shardErr(k int, info *format.ShardInfo, err error) error {
	if ce, ok := err.(*CorruptError); ok {
		off := ce.Offset
		if off < 0 {
			off = -1
		}
		return &format.CorruptError{File: info.RawData.Basename, Shard: k, Sample: -1, Offset: off, Reason: ce.Reason, Err: ce.Err}
	}
	return err
}
