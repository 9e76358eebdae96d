package input

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/compress"
	"github.com/sluicedata/sluice/storage"
)

// MaxIndexBytes bounds the index.json of an MDS input.
const MaxIndexBytes = 1 << 30

// mdsSource reads the samples of an MDS dataset, shard by shard, as their
// raw column bytes (re-sharding and re-compressing never re-encode).
type mdsSource struct {
	b      storage.Bucket
	bs     *buckets
	name   string
	idx    *format.Index
	shards []int // shard positions this part reads
	cols   []Column
	sizes  []int
	nvar   int
	part   Part
	byFile bool

	next  int    // next entry of shards
	cur   []byte // raw bytes of the open shard
	curN  int    // samples in cur
	curJ  int    // next sample of cur
	curK  int    // shard position of cur
	index int64  // samples read so far over all parts (item-level parts)
}

func openMDS(ctx context.Context, root string, opts *Options, bs *buckets) (Source, error) {
	b, err := bs.open(ctx, root)
	if err != nil {
		return nil, fmt.Errorf("input: %w", err)
	}
	raw, err := storage.ReadAll(ctx, b, format.IndexFile, MaxIndexBytes)
	if err != nil {
		return nil, fmt.Errorf("input: %w", err)
	}
	idx, err := format.ParseIndex(raw)
	if err != nil {
		return nil, fmt.Errorf("input: %s: %w", b.URL(format.IndexFile), err)
	}
	if len(idx.Shards) == 0 {
		return nil, fmt.Errorf("input: %s has no shards", b.URL(format.IndexFile))
	}
	if keys := wdsIndexKeys(idx); keys != nil {
		return nil, &wdsIndexError{root: root, keys: keys}
	}
	first := &idx.Shards[0]
	for k := range idx.Shards {
		s := &idx.Shards[k]
		if s.Format != "mds" {
			return nil, fmt.Errorf("input: %s: shard %d has format %q; only mds datasets can be re-sharded", root, k, s.Format)
		}
		if !equalStrings(s.ColumnNames, first.ColumnNames) || !equalStrings(s.ColumnEncodings, first.ColumnEncodings) {
			return nil, fmt.Errorf("input: %s: shard %d has other columns than shard 0", root, k)
		}
	}
	m := &mdsSource{b: b, bs: bs, name: root, idx: idx, sizes: first.ColumnSizes, part: opts.Part}
	for i, n := range first.ColumnNames {
		m.cols = append(m.cols, Column{Name: n, Encoding: first.ColumnEncodings[i]})
		if i >= len(m.sizes) || m.sizes[i] == 0 {
			m.nvar++
		}
	}
	if len(m.sizes) != len(m.cols) {
		return nil, fmt.Errorf("input: %s: shard 0 has %d column sizes for %d columns", root, len(m.sizes), len(m.cols))
	}
	m.byFile = opts.Part.Count > 1 && len(idx.Shards) >= opts.Part.Count
	for k := range idx.Shards {
		if m.byFile && k%opts.Part.Count != opts.Part.Index {
			continue
		}
		m.shards = append(m.shards, k)
	}
	return m, nil
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func (m *mdsSource) Columns() []Column { return m.cols }

// loadShard reads shard k, decompressing it if needed, and checks its
// header against the index.
func (m *mdsSource) loadShard(ctx context.Context, k int) error {
	s := &m.idx.Shards[k]
	fi := s.RawData
	if s.ZipData != nil {
		fi = *s.ZipData
	}
	data, err := storage.ReadAll(ctx, m.b, fi.Basename, fi.Bytes)
	if err != nil {
		return fmt.Errorf("input: %w", err)
	}
	if int64(len(data)) != fi.Bytes {
		return &format.CorruptError{File: fi.Basename, Shard: k, Sample: -1, Offset: -1,
			Reason: fmt.Sprintf("file has %d bytes, index says %d", len(data), fi.Bytes)}
	}
	if s.ZipData != nil {
		data, err = compress.Decompress(s.Family(), data, s.RawData.Bytes)
		if err != nil {
			return fmt.Errorf("input: %s: shard %d: %w", fi.Basename, k, err)
		}
	}
	corrupt := func(reason string) error {
		return &format.CorruptError{File: s.RawData.Basename, Shard: k, Sample: -1, Offset: -1, Reason: reason}
	}
	if int64(len(data)) != s.RawData.Bytes || len(data) < 4 {
		return corrupt(fmt.Sprintf("raw shard has %d bytes, index says %d", len(data), s.RawData.Bytes))
	}
	n := int(binary.LittleEndian.Uint32(data))
	if n != s.Samples || int64(n) > (int64(len(data))-4)/4-1 {
		return corrupt(fmt.Sprintf("header says %d samples, index says %d", n, s.Samples))
	}
	prev := uint32(4 + 4*(n+1))
	for j := 0; j <= n; j++ {
		off := binary.LittleEndian.Uint32(data[4+4*j:])
		if off < prev || int64(off) > int64(len(data)) {
			return corrupt(fmt.Sprintf("offset %d of sample %d out of order or past the end", off, j))
		}
		prev = off
	}
	if int64(prev) != int64(len(data)) {
		return corrupt("last offset is not the file size")
	}
	m.cur, m.curN, m.curJ, m.curK = data, n, 0, k
	return nil
}

func (m *mdsSource) Read(ctx context.Context, dst []Item, max int) ([]Item, error) {
	if err := ctx.Err(); err != nil {
		return dst, err
	}
	for n := 0; n < max; {
		if m.cur == nil || m.curJ >= m.curN {
			m.cur = nil
			if m.next >= len(m.shards) {
				if n == 0 {
					return dst, io.EOF
				}
				return dst, nil
			}
			if err := m.loadShard(ctx, m.shards[m.next]); err != nil {
				return dst, err
			}
			m.next++
			continue
		}
		j := m.curJ
		m.curJ++
		if !m.byFile && m.part.Count > 1 {
			i := m.index
			m.index++
			if i%int64(m.part.Count) != int64(m.part.Index) {
				continue
			}
		}
		lo := binary.LittleEndian.Uint32(m.cur[4+4*j:])
		hi := binary.LittleEndian.Uint32(m.cur[8+4*j:])
		dst = append(dst, Item{File: m.idx.Shards[m.curK].RawData.Basename, Pos: int64(j), Data: m.cur[lo:hi:hi]})
		n++
	}
	return dst, nil
}

// Decode splits an MDS record into its columns' bytes (spec section 3.2).
func (m *mdsSource) Decode(_ context.Context, it *Item, fn FieldFunc) error {
	rec := it.Data
	if len(rec) < 4*m.nvar {
		return &format.CorruptError{File: it.File, Shard: -1, Sample: int(it.Pos), Offset: -1, Reason: "record shorter than its size table"}
	}
	head, body := rec[:4*m.nvar], rec[4*m.nvar:]
	for i, c := range m.cols {
		size := m.sizes[i]
		if size == 0 {
			size = int(binary.LittleEndian.Uint32(head))
			head = head[4:]
		}
		if size < 0 || size > len(body) {
			return &format.CorruptError{File: it.File, Shard: -1, Sample: int(it.Pos), Offset: -1,
				Reason: fmt.Sprintf("column %q overruns the record", c.Name)}
		}
		if err := fn([]byte(c.Name), Value{Kind: Bytes, Bytes: body[:size:size]}); err != nil {
			return err
		}
		body = body[size:]
	}
	if len(body) != 0 {
		return &format.CorruptError{File: it.File, Shard: -1, Sample: int(it.Pos), Offset: -1, Reason: "record has trailing bytes"}
	}
	return nil
}

func (m *mdsSource) Close() error { return errors.Join(m.bs.Close()) }
