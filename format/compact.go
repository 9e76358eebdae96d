package format

import (
	"maps"
	"slices"
)

// CompactIndex is a parsed index.json in a column layout: a sample count
// and a configuration number per shard, the distinct writer
// configurations once (shards of one dataset nearly always share one),
// and the file descriptions as fixed-size records whose basenames and
// digests live in one string. A 40k-shard index takes a few MB this way,
// where []ShardInfo takes tens of MB and one allocation per string.
//
// ParseCompactIndex and ReadCompactIndex build it; it accepts exactly the
// indexes ParseIndex accepts and Index() returns what ParseIndex returns.
// A CompactIndex is immutable and safe for concurrent use.
type CompactIndex struct {
	merged  bool
	samples []uint32    // per shard
	config  []uint32    // per shard: index into configs
	configs []ShardInfo // distinct configurations, without files and samples
	fileOff []uint32    // per shard, plus one: first record in files
	files   []compactFile
	arena   string // basenames and encoded digests
	total   int64
}

// compactFile is one file of a shard; its strings are ranges of arena.
type compactFile struct {
	bytes      int64
	name, nlen uint32
	hash, hlen uint32 // digests: uvarint-prefixed key, value pairs
	kind       uint8  // fileRaw... (low 2 bits); hashesSet when "hashes" was an object
}

const (
	fileRaw uint8 = iota
	fileZip
	fileRawMeta
	fileZipMeta
	hashesSet uint8 = 4
)

// Len returns the number of shards.
func (c *CompactIndex) Len() int { return len(c.samples) }

// Merged reports merge_index's key order (see Index.Merged).
func (c *CompactIndex) Merged() bool { return c.merged }

// Samples returns the total number of samples.
func (c *CompactIndex) Samples() int64 { return c.total }

// ShardSamples returns shard i's sample count.
func (c *CompactIndex) ShardSamples(i int) int { return int(c.samples[i]) }

// SampleCounts returns every shard's sample count, in index order.
func (c *CompactIndex) SampleCounts() []int64 {
	out := make([]int64, len(c.samples))
	for i, n := range c.samples {
		out[i] = int64(n)
	}
	return out
}

// NumConfigs returns the number of distinct shard configurations (format,
// columns, compression, hashes, size limit and unknown keys).
func (c *CompactIndex) NumConfigs() int { return len(c.configs) }

// Basename returns shard i's raw data basename.
func (c *CompactIndex) Basename(i int) string {
	f := &c.files[c.fileOff[i]]
	return c.arena[f.name : f.name+f.nlen]
}

// Shard returns shard i as a ShardInfo of its own (slices and maps are
// not shared with other shards; strings are).
func (c *CompactIndex) Shard(i int) ShardInfo {
	var s ShardInfo
	c.fill(&s, i)
	return s
}

func (c *CompactIndex) fill(s *ShardInfo, i int) {
	cfg := &c.configs[c.config[i]]
	*s = ShardInfo{
		Format: cfg.Format, Version: 2, Samples: int(c.samples[i]), SizeLimit: cfg.SizeLimit,
		Compression: cfg.Compression, Hashes: clip(cfg.Hashes),
		ColumnEncodings: clip(cfg.ColumnEncodings), ColumnNames: clip(cfg.ColumnNames),
		ColumnSizes: clip(cfg.ColumnSizes), Newline: cfg.Newline, Separator: cfg.Separator,
	}
	if cfg.Columns != nil {
		s.Columns = maps.Clone(cfg.Columns)
	}
	if cfg.Extra != nil {
		s.Extra = make(map[string][]byte, len(cfg.Extra))
		for k, v := range cfg.Extra {
			s.Extra[k] = slices.Clip(slices.Clone(v))
		}
	}
	for _, f := range c.files[c.fileOff[i]:c.fileOff[i+1]] {
		fi := c.fileInfo(&f)
		switch f.kind &^ hashesSet {
		case fileRaw:
			s.RawData = fi
		case fileZip:
			s.ZipData = &fi
		case fileRawMeta:
			s.RawMeta = &fi
		case fileZipMeta:
			s.ZipMeta = &fi
		}
	}
}

// clip copies a slice to one of its own with no spare capacity (nil stays
// nil).
func clip[S ~[]E, E any](s S) S {
	if s == nil {
		return nil
	}
	return slices.Clip(slices.Clone(s))
}

func (c *CompactIndex) fileInfo(f *compactFile) FileInfo {
	fi := FileInfo{Basename: c.arena[f.name : f.name+f.nlen], Bytes: f.bytes}
	if f.kind&hashesSet == 0 {
		return fi
	}
	h := c.arena[f.hash : f.hash+f.hlen]
	fi.Hashes = map[string]string{}
	for len(h) > 0 {
		var k, v string
		k, h = cutString(h)
		v, h = cutString(h)
		fi.Hashes[k] = v
	}
	return fi
}

// cutString splits a uvarint-length-prefixed string off s.
func cutString(s string) (string, string) {
	var n, shift uint
	w := 0
	for w < len(s) {
		b := s[w]
		w++
		n |= uint(b&0x7f) << shift
		if b < 0x80 {
			break
		}
		shift += 7
	}
	return s[w : w+int(n)], s[w+int(n):]
}

// Shard file kinds, for CompactIndex.File and FileHash.
const (
	// RawData is a shard's raw data file (ShardInfo.RawData).
	RawData = int(fileRaw)
	// ZipData is its compressed data file (ShardInfo.ZipData).
	ZipData = int(fileZip)
	// RawMeta is the raw meta file of a split format (ShardInfo.RawMeta).
	RawMeta = int(fileRawMeta)
	// ZipMeta is the compressed meta file (ShardInfo.ZipMeta).
	ZipMeta = int(fileZipMeta)
)

// file returns shard i's record of the given kind, or nil.
func (c *CompactIndex) file(i, kind int) *compactFile {
	for k := c.fileOff[i]; k < c.fileOff[i+1]; k++ {
		if f := &c.files[k]; int(f.kind&^hashesSet) == kind {
			return f
		}
	}
	return nil
}

// File returns the basename and size of shard i's file of the given kind
// (RawData, ZipData, RawMeta or ZipMeta); ok is false when the shard has
// no such file.
func (c *CompactIndex) File(i, kind int) (name string, size int64, ok bool) {
	f := c.file(i, kind)
	if f == nil {
		return "", 0, false
	}
	return c.arena[f.name : f.name+f.nlen], f.bytes, true
}

// FileHash returns the digest named algo of shard i's file of the given
// kind as the index writes it ("" when the index has none).
func (c *CompactIndex) FileHash(i, kind int, algo string) string {
	f := c.file(i, kind)
	if f == nil {
		return ""
	}
	h := c.arena[f.hash : f.hash+f.hlen]
	for len(h) > 0 {
		var k, v string
		k, h = cutString(h)
		v, h = cutString(h)
		if k == algo {
			return v
		}
	}
	return ""
}

// Config returns the number of shard i's writer configuration: shards
// with the same number have the same fields except Samples and the files
// (numbers run from 0 to NumConfigs()-1).
func (c *CompactIndex) Config(i int) int { return int(c.config[i]) }

// ConfigInfo returns configuration k (see Config) as a ShardInfo whose
// Samples and files are zero. It is shared: the caller must treat it as
// read-only.
func (c *CompactIndex) ConfigInfo(k int) *ShardInfo { return &c.configs[k] }

// SharedShard returns shard i as SharedIndex returns it: sharing its
// configuration's slices and maps with the other shards of that
// configuration (read-only for the caller).
func (c *CompactIndex) SharedShard(i int) ShardInfo {
	var s ShardInfo
	c.shared(&s, i, nil, nil)
	return s
}

// shared fills s with shard i sharing its configuration; the optional
// file records go to slab's head when it has room (it returns the rest),
// and empty digest maps are empty when it is set.
func (c *CompactIndex) shared(s *ShardInfo, i int, slab []FileInfo, empty map[string]string) []FileInfo {
	*s = c.configs[c.config[i]]
	s.Version, s.Samples = 2, int(c.samples[i])
	// No spare capacity: an append by the caller copies instead of
	// writing into the other shards' slices.
	s.Hashes, s.ColumnEncodings = slices.Clip(s.Hashes), slices.Clip(s.ColumnEncodings)
	s.ColumnNames, s.ColumnSizes = slices.Clip(s.ColumnNames), slices.Clip(s.ColumnSizes)
	for _, f := range c.files[c.fileOff[i]:c.fileOff[i+1]] {
		var fi FileInfo
		if f.kind&hashesSet != 0 && f.hlen == 0 && empty != nil {
			fi = FileInfo{Basename: c.arena[f.name : f.name+f.nlen], Bytes: f.bytes, Hashes: empty}
		} else {
			fi = c.fileInfo(&f)
		}
		if f.kind&^hashesSet == fileRaw {
			s.RawData = fi
			continue
		}
		var p *FileInfo
		if len(slab) > 0 {
			p = &slab[0]
			slab[0], slab = fi, slab[1:]
		} else {
			p = new(FileInfo)
			*p = fi
		}
		switch f.kind &^ hashesSet {
		case fileZip:
			s.ZipData = p
		case fileRawMeta:
			s.RawMeta = p
		case fileZipMeta:
			s.ZipMeta = p
		}
	}
	return slab
}

// SharedIndex returns the index as ParseIndex returns it, except that the
// shards of one configuration share its slices and maps (column names,
// encodings and sizes, shard hashes, columns, unknown keys), the files'
// empty digest maps are one map, and the optional file records live in
// one array: a few allocations per 40k shards instead of seven per shard.
// The caller must treat the shards as read-only.
func (c *CompactIndex) SharedIndex() *Index {
	idx := &Index{Shards: make([]ShardInfo, len(c.samples)), Merged: c.merged}
	slab := make([]FileInfo, len(c.files)) // the optional files (a little spare room)
	empty := map[string]string{}
	for i := range idx.Shards {
		slab = c.shared(&idx.Shards[i], i, slab, empty)
	}
	return idx
}

// Index returns the index as ParseIndex returns it.
func (c *CompactIndex) Index() *Index {
	idx := &Index{Shards: make([]ShardInfo, len(c.samples)), Merged: c.merged}
	for i := range idx.Shards {
		c.fill(&idx.Shards[i], i)
	}
	return idx
}
