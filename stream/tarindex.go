package stream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/wds"
	"github.com/sluicedata/sluice/internal/mmap"
	"github.com/sluicedata/sluice/storage"
)

// seekGap is the largest forward skip the ranged tar reader reads through;
// a longer one ends the current request and starts a new one where the
// next header is. Archives of small members are thus read in one request,
// archives of large members by their headers only.
const seekGap = 1 << 20

// TarIndexOptions tunes BuildTarIndex. A nil *TarIndexOptions means the
// defaults.
type TarIndexOptions struct {
	// Parallel is the number of shards read at once; 0 means
	// 4×GOMAXPROCS, at least 16.
	Parallel int
	// Reader bounds members and samples (see wds.ReaderOptions).
	Reader *wds.ReaderOptions
}

// BuildTarIndex reads the headers of each tar shard keys[i] under b, in
// parallel and with ranged reads that skip member data, and returns an
// index of format wds: per shard its sample count, byte size and header
// digest (wds.HeaderDigest). A key that ends one shard and starts the next
// is an error (WebDataset would yield two samples with the same key; an
// index cannot place it). Errors name the shard and member offset.
func BuildTarIndex(ctx context.Context, b storage.Bucket, keys []string, opts *TarIndexOptions) (*format.Index, error) {
	var o TarIndexOptions
	if opts != nil {
		o = *opts
	}
	// Each shard in flight holds one set of read buffers; they are reused
	// by the next shard, not allocated (and faulted in) afresh.
	bufs := &sync.Pool{New: func() any { return new(readBuffers) }}
	return scanTars(ctx, keys, o.Parallel, b.URL, func(ctx context.Context, k string) (wds.Summary, int64, error) {
		rb := bufs.Get().(*readBuffers)
		defer bufs.Put(rb)
		return scanTar(ctx, b, k, o.Reader, rb)
	})
}

// scanTars summarises the shards keys with scan, parallel at once (0: the
// default), and assembles their index; name gives a shard's name for
// errors.
func scanTars(ctx context.Context, keys []string, parallel int, name func(string) string,
	scan func(context.Context, string) (wds.Summary, int64, error)) (*format.Index, error) {
	if parallel <= 0 {
		parallel = max(16, 4*runtime.GOMAXPROCS(0))
	}
	if len(keys) > format.MaxIndexShards {
		return nil, fmt.Errorf("stream: %d tar shards exceed the limit of %d", len(keys), format.MaxIndexShards)
	}
	for _, k := range keys {
		if err := format.CheckBasename(k); err != nil {
			return nil, fmt.Errorf("stream: tar shard: %w", err)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sums := make([]wds.Summary, len(keys))
	sizes := make([]int64, len(keys))
	errs := make([]error, len(keys))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(parallel, len(keys)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				sums[i], sizes[i], errs[i] = scan(ctx, keys[i])
				if errs[i] != nil {
					cancel()
				}
			}
		}()
	}
	for i := range keys {
		select {
		case next <- i:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(next)
	wg.Wait()
	// The first real failure, not the cancellations it caused.
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return nil, err
		}
	}
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	idx := &format.Index{Shards: make([]format.ShardInfo, len(keys))}
	for i, k := range keys {
		if i > 0 && sums[i].Samples > 0 && sums[i-1].Samples > 0 && sums[i].FirstKey == sums[i-1].LastKey {
			return nil, &wds.CorruptError{Shard: name(k), Offset: sums[i].FirstOffset,
				Reason: fmt.Sprintf("key %q continues the last sample of the previous shard %s (at offset %d): a sample must not be split across shards",
					sums[i].FirstKey, name(keys[i-1]), sums[i-1].LastOffset)}
		}
		idx.Shards[i] = TarShardInfo(k, sizes[i], sums[i])
	}
	return idx, nil
}

// TarShardInfo is the index entry of a tar shard.
func TarShardInfo(key string, size int64, s wds.Summary) format.ShardInfo {
	return format.ShardInfo{
		Format: wds.Format, Version: 2, Samples: s.Samples,
		RawData: format.FileInfo{Basename: key, Bytes: size, Hashes: map[string]string{wds.HeaderDigest: s.Digest}},
	}
}

// scanTar summarises one shard through ranged reads, buffered by rb. The
// first request reads the whole object: a store that describes the object
// in its answer (storage.InfoReader) needs no Stat request first.
func scanTar(ctx context.Context, b storage.Bucket, key string, ro *wds.ReaderOptions, rb *readBuffers) (wds.Summary, int64, error) {
	rc, err := b.NewRangeReader(ctx, key, 0, -1)
	if err != nil {
		return wds.Summary{}, 0, fmt.Errorf("stream: tar shard %s: %w", b.URL(key), err)
	}
	info, ok := storage.ReaderInfo(rc)
	if !ok {
		if info, err = b.Stat(ctx, key); err != nil {
			rc.Close()
			return wds.Summary{}, 0, fmt.Errorf("stream: tar shard %s: %w", b.URL(key), err)
		}
	}
	r := &rangeReader{ctx: ctx, b: b, key: key, size: info.Size, readBuffers: rb}
	r.adopt(rc)
	defer r.Close()
	s, err := wds.Scan(r, ro)
	if err != nil {
		return wds.Summary{}, 0, withShardName(err, b.URL(key))
	}
	return s, info.Size, nil
}

// withShardName names the shard in a wds.CorruptError, or wraps err.
func withShardName(err error, name string) error {
	var ce *wds.CorruptError
	if errors.As(err, &ce) && ce.Shard == "" {
		ce.Shard = name
		return ce
	}
	return fmt.Errorf("stream: tar shard %s: %w", name, err)
}

// listTars returns the keys of the .tar objects under b, sorted.
func listTars(ctx context.Context, b storage.Bucket) ([]string, error) {
	var keys []string
	err := b.List(ctx, "", func(o storage.ObjectInfo) error {
		if isTarName(o.Key) {
			if len(keys) >= format.MaxIndexShards {
				return fmt.Errorf("more than %d .tar objects", format.MaxIndexShards)
			}
			keys = append(keys, o.Key)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(keys)
	return keys, nil
}

// selectTarIndex returns the entries of idx for keys, in keys' order, when
// idx is a wds index that lists every one of them; ok is false otherwise.
func selectTarIndex(idx *format.Index, keys []string) (*format.Index, bool) {
	by := make(map[string]int, len(idx.Shards))
	for i := range idx.Shards {
		if idx.Shards[i].Format != wds.Format {
			return nil, false
		}
		by[idx.Shards[i].RawData.Basename] = i
	}
	out := &format.Index{Shards: make([]format.ShardInfo, len(keys))}
	for i, k := range keys {
		j, ok := by[k]
		if !ok {
			return nil, false
		}
		out.Shards[i] = idx.Shards[j]
	}
	return out, true
}

// localTarIndex returns the index of a local tar dataset read in place, and
// the directory its basenames are relative to: spec is a tar spec of local
// paths, or dir a directory holding .tar files and no index.json. It
// returns a nil index for anything else. The index beside the shards is
// used when it lists them all; otherwise the shards are scanned (nothing is
// written beside them).
func localTarIndex(ctx context.Context, spec, dir string) (*format.Index, string, error) {
	var root string
	var keys []string
	if ts, err := parseTarSpec(spec); err != nil {
		return nil, "", err
	} else if ts != nil {
		root, keys = ts.root, ts.keys
	} else {
		if _, err := os.Stat(filepath.Join(dir, format.IndexFile)); !errors.Is(err, fs.ErrNotExist) {
			return nil, "", nil
		}
		err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !e.IsDir() && isTarName(p) {
				rel, _ := filepath.Rel(dir, p)
				keys = append(keys, filepath.ToSlash(rel))
			}
			return nil
		})
		if err != nil || len(keys) == 0 {
			return nil, "", nil
		}
		sort.Strings(keys)
		root = dir
	}
	if b, err := os.ReadFile(filepath.Join(root, format.IndexFile)); err == nil {
		if idx, err := format.ParseIndex(b); err == nil {
			if sel, ok := selectTarIndex(idx, keys); ok {
				return sel, root, nil
			}
		}
	}
	idx, err := scanTars(ctx, keys, 0, func(k string) string { return filepath.Join(root, filepath.FromSlash(k)) },
		func(ctx context.Context, k string) (wds.Summary, int64, error) {
			p := filepath.Join(root, filepath.FromSlash(k))
			m, err := mmap.Open(p)
			if err != nil {
				return wds.Summary{}, 0, fmt.Errorf("stream: tar shard: %w", err)
			}
			defer m.Close()
			// A seekable reader: the digest is the one a ranged scan gives.
			s, err := wds.Scan(bytes.NewReader(m.Bytes()), nil)
			if err != nil {
				return wds.Summary{}, 0, withShardName(err, p)
			}
			return s, m.Len(), nil
		})
	if err != nil {
		return nil, "", fmt.Errorf("index tar shards of %s: %w", spec, err)
	}
	return idx, root, nil
}
