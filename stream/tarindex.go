package stream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sort"
	"sync"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/wds"
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
	if o.Parallel <= 0 {
		o.Parallel = max(16, 4*runtime.GOMAXPROCS(0))
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
	for range min(o.Parallel, len(keys)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				sums[i], sizes[i], errs[i] = scanTar(ctx, b, keys[i], o.Reader)
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
	idx := &format.Index{Shards: make([]format.ShardInfo, len(keys))}
	for i, k := range keys {
		if i > 0 && sums[i].Samples > 0 && sums[i-1].Samples > 0 && sums[i].FirstKey == sums[i-1].LastKey {
			return nil, &wds.CorruptError{Shard: b.URL(k), Offset: sums[i].FirstOffset,
				Reason: fmt.Sprintf("key %q continues the last sample of the previous shard %s (at offset %d): a sample must not be split across shards",
					sums[i].FirstKey, b.URL(keys[i-1]), sums[i-1].LastOffset)}
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

// scanTar summarises one shard through ranged reads.
func scanTar(ctx context.Context, b storage.Bucket, key string, ro *wds.ReaderOptions) (wds.Summary, int64, error) {
	info, err := b.Stat(ctx, key)
	if err != nil {
		return wds.Summary{}, 0, fmt.Errorf("stream: tar shard %s: %w", b.URL(key), err)
	}
	r := &rangeReader{ctx: ctx, b: b, key: key, size: info.Size}
	defer r.Close()
	s, err := wds.Scan(r, ro)
	if err != nil {
		var ce *wds.CorruptError
		if errors.As(err, &ce) && ce.Shard == "" {
			ce.Shard = b.URL(key)
			return wds.Summary{}, 0, ce
		}
		return wds.Summary{}, 0, fmt.Errorf("stream: tar shard %s: %w", b.URL(key), err)
	}
	return s, info.Size, nil
}

// rangeReader reads an object sequentially through ranged requests and
// seeks by reading through short gaps or starting a new request past long
// ones. Reads past the object's size return io.EOF.
type rangeReader struct {
	ctx  context.Context
	b    storage.Bucket
	key  string
	size int64
	pos  int64         // logical position
	body io.ReadCloser // open request, positioned at at
	at   int64
	reqs int // requests made, for tests
}

func (r *rangeReader) Read(p []byte) (int, error) {
	if r.pos >= r.size {
		return 0, io.EOF
	}
	if r.body != nil && (r.pos < r.at || r.pos-r.at > seekGap) {
		r.body.Close()
		r.body = nil
	}
	if r.body == nil {
		body, err := r.b.NewRangeReader(r.ctx, r.key, r.pos, r.size-r.pos)
		if err != nil {
			return 0, err
		}
		r.body, r.at = body, r.pos
		r.reqs++
	}
	if r.pos > r.at {
		n, err := io.CopyN(io.Discard, r.body, r.pos-r.at)
		r.at += n
		if err != nil {
			return 0, unexpectedEOF(err)
		}
	}
	if max := r.size - r.pos; int64(len(p)) > max {
		p = p[:max]
	}
	n, err := r.body.Read(p)
	r.pos += int64(n)
	r.at += int64(n)
	if err == io.EOF && r.pos < r.size {
		return n, io.ErrUnexpectedEOF
	}
	if err == io.EOF {
		err = nil
	}
	return n, err
}

func unexpectedEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

func (r *rangeReader) Seek(off int64, whence int) (int64, error) {
	switch whence {
	case io.SeekCurrent:
		off += r.pos
	case io.SeekEnd:
		off += r.size
	}
	if off < 0 {
		return r.pos, errors.New("stream: seek before the start")
	}
	r.pos = off
	return off, nil
}

func (r *rangeReader) Close() error {
	if r.body != nil {
		err := r.body.Close()
		r.body = nil
		return err
	}
	return nil
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
