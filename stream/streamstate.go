package stream

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/sluicedata/sluice/cache"
	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/hashing"
	"github.com/sluicedata/sluice/plan"
	"github.com/sluicedata/sluice/storage"
)

// streamState is one opened stream.
type streamState struct {
	remote string
	bucket storage.Bucket // nil: local only
	dir    string         // absolute local directory of the stream
	cds    *cache.Dataset // nil: local only
	// compact is the parsed index.json; index holds a tar dataset's
	// entries instead (built, or selected from its index).
	compact *format.CompactIndex
	index   *format.Index
	// infos are the compact index's entries as ShardInfo, made on first
	// use (a first batch touches a few of 40k shards).
	infos     []atomic.Pointer[format.ShardInfo]
	keepZip   bool
	validate  string
	firstShar int
	tar       *tarSpec // the shards of a tar dataset, nil otherwise
	// builtIndex is the number of tar shards whose headers this Open
	// scanned for want of an index.json listing them (0: none).
	builtIndex int
	// indexWritten, when the index was downloaded by this Open, waits
	// for its write into the cache behind the first downloads and
	// returns that write's error (nil: none pending).
	indexWritten func() error
	// inflating serialises decompression of local-only compressed shards.
	inflating sync.Mutex
}

// shardRef locates a global shard.
type shardRef struct {
	stream int
	local  int // shard ID within the stream
}

// numShards returns the stream's number of shards.
// ErrHashMismatch is a downloaded file whose validate_hash digest differs
// from the one its index.json gives (MosaicML: "Checksum failure", a
// ValueError). The cache's download attempts read such a file again.
var ErrHashMismatch = errors.New("checksum failure")

func (st *streamState) numShards() int {
	if st.compact != nil {
		return st.compact.Len()
	}
	return len(st.index.Shards)
}

// info returns the stream's shard j as a ShardInfo (read-only: the shards
// of one configuration share its slices).
func (st *streamState) info(j int) *format.ShardInfo {
	if st.compact == nil {
		return &st.index.Shards[j]
	}
	if p := st.infos[j].Load(); p != nil {
		return p
	}
	si := st.compact.SharedShard(j)
	st.infos[j].CompareAndSwap(nil, &si)
	return st.infos[j].Load()
}

// basename returns the raw data file of the stream's shard j.
func (st *streamState) basename(j int) string {
	if st.compact != nil {
		return st.compact.Basename(j)
	}
	return st.index.Shards[j].RawData.Basename
}

// setCompact makes c the stream's index.
func (st *streamState) setCompact(c *format.CompactIndex) {
	st.compact, st.index = c, nil
	st.infos = make([]atomic.Pointer[format.ShardInfo], c.Len())
}

// file returns the basename and size of the stream's shard j's file of
// the given kind (format.RawData, ZipData, RawMeta or ZipMeta); ok is
// false when the shard has none.
func (st *streamState) file(j, kind int) (name string, size int64, ok bool) {
	if st.compact != nil {
		return st.compact.File(j, kind)
	}
	si := &st.index.Shards[j]
	fi := [...]*format.FileInfo{&si.RawData, si.ZipData, si.RawMeta, si.ZipMeta}[kind]
	if fi == nil {
		return "", 0, false
	}
	return fi.Basename, fi.Bytes, true
}

// fileHash returns the digest algo of shard j's file of the given kind.
func (st *streamState) fileHash(j, kind int, algo string) string {
	if st.compact != nil {
		return st.compact.FileHash(j, kind, algo)
	}
	si := &st.index.Shards[j]
	if fi := [...]*format.FileInfo{&si.RawData, si.ZipData, si.RawMeta, si.ZipMeta}[kind]; fi != nil {
		return fi.Hashes[algo]
	}
	return ""
}

// compression returns shard j's compression ("" for none).
func (st *streamState) compression(j int) string {
	if st.compact != nil {
		return st.compact.ConfigInfo(st.compact.Config(j)).Compression
	}
	return st.index.Shards[j].Compression
}

// cacheShards describes the stream's shards to the cache: their records
// in one array and their files in another (two allocations, not one per
// shard), read from the compact index without making any ShardInfo.
func (st *streamState) cacheShards() []cache.Shard {
	n := st.numShards()
	nfiles := n
	for j := range n {
		if _, _, ok := st.file(j, format.RawMeta); ok {
			nfiles++
		}
	}
	shards := make([]cache.Shard, n)
	files := make([]cache.File, 0, nfiles)
	for j := range n {
		start := len(files)
		files = append(files, st.cacheFile(j, format.RawData, format.ZipData))
		if _, _, ok := st.file(j, format.RawMeta); ok {
			files = append(files, st.cacheFile(j, format.RawMeta, format.ZipMeta))
		}
		// No spare capacity: the shard's files are that slice's tail.
		shards[j] = cache.Shard{Files: files[start:len(files):len(files)]}
	}
	return shards
}

// cacheFile describes one file of shard j to the cache: its raw form of
// kind raw and, if the shard has it, its compressed form of kind zip.
func (st *streamState) cacheFile(j, raw, zip int) cache.File {
	name, size, _ := st.file(j, raw)
	f := cache.File{Raw: name, RawBytes: size}
	check, checkKind := name, raw
	if zname, zsize, ok := st.file(j, zip); ok {
		f.Zip, f.ZipBytes, f.Compression = zname, zsize, st.compression(j)
		check, checkKind = zname, zip
	}
	if st.validate != "" {
		algo, want := st.validate, st.fileHash(j, checkKind, st.validate)
		f.Verify = func(r io.Reader) error {
			if want == "" {
				return fmt.Errorf("validate_hash %s: %w: the index has no %s digest for %s", algo, plan.ErrInvalid, algo, check)
			}
			h, err := hashing.New(algo)
			if err != nil {
				return err
			}
			if _, err := io.Copy(h, r); err != nil {
				return err
			}
			if got := hex.EncodeToString(h.Sum(nil)); got != want {
				return fmt.Errorf("%w: %s %s, the index says %s", ErrHashMismatch, algo, got, want)
			}
			return nil
		}
	}
	return f
}
