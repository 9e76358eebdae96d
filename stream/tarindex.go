package stream

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
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

// scanTar summarises one shard through ranged reads, buffered by rb.
func scanTar(ctx context.Context, b storage.Bucket, key string, ro *wds.ReaderOptions, rb *readBuffers) (wds.Summary, int64, error) {
	info, err := b.Stat(ctx, key)
	if err != nil {
		return wds.Summary{}, 0, fmt.Errorf("stream: tar shard %s: %w", b.URL(key), err)
	}
	r := &rangeReader{ctx: ctx, b: b, key: key, size: info.Size, readBuffers: rb}
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

// rangeReader reads an object sequentially through ranged requests and
// seeks by reading through short gaps or starting a new request past long
// ones. Reads past the object's size return io.EOF.
type rangeReader struct {
	ctx  context.Context
	b    storage.Bucket
	key  string
	size int64
	pos  int64         // logical position
	body *bufio.Reader // buffered body of the open request, positioned at at
	rc   io.ReadCloser // the open request
	at   int64
	from int64 // where the open request started
	reqs int   // requests made, for tests
	*readBuffers
}

// readBuffers are a rangeReader's buffers, reused across its requests and,
// through BuildTarIndex's pool, across shards. A nil buffer is made on
// first use.
type readBuffers struct {
	buf *bufio.Reader // over the open request
	big *bufio.Reader // over buf once a request reads densely
}

// readBuffer is the ranged tar reader's buffer: member data inside it is
// skipped without being copied out. It stays small so that a request
// that ends at the next long gap has fetched little past the header.
const readBuffer = 64 << 10

// A request read through for denseAfter bytes (an archive of small
// members, read whole) continues through a buffer of readBufferDense
// bytes: fewer, larger reads. 1 MiB instead of 64 KiB took the client's
// CPU per 64 MB tar of 20 KB members from the loopback S3 server from
// 31–34 ms to 24–27 ms (BenchmarkTarIndexBuild cpu-ms/tar).
const (
	denseAfter      = 4 << 20
	readBufferDense = 1 << 20
)

func (r *rangeReader) Read(p []byte) (int, error) {
	if r.pos >= r.size {
		return 0, io.EOF
	}
	if r.body != nil && (r.pos < r.at || r.pos-r.at > seekGap) {
		r.Close()
	}
	if r.body == nil {
		rc, err := r.b.NewRangeReader(r.ctx, r.key, r.pos, r.size-r.pos)
		if err != nil {
			return 0, err
		}
		if r.readBuffers == nil {
			r.readBuffers = new(readBuffers)
		}
		if r.buf == nil {
			r.buf = bufio.NewReaderSize(rc, readBuffer)
		} else {
			r.buf.Reset(rc)
		}
		r.rc, r.body, r.at, r.from = rc, r.buf, r.pos, r.pos
		r.reqs++
	}
	if r.body == r.buf && r.at-r.from >= denseAfter {
		// Reading through: larger reads from here on (buf's buffered
		// bytes come first, then big reads pass through it).
		if r.big == nil {
			r.big = bufio.NewReaderSize(r.buf, readBufferDense)
		} else {
			r.big.Reset(r.buf)
		}
		r.body = r.big
	}
	if r.pos > r.at {
		n, err := r.body.Discard(int(r.pos - r.at))
		r.at += int64(n)
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

// drainLimit is the most unread bytes Close reads through to the end of a
// request, so that its connection goes back to the pool: a body closed
// before its end tears the connection down, and the next request dials a
// new one. A scan stops at the end-of-archive blocks, just short of the
// body's end (the end of file was never read), or before trailing record
// padding.
const drainLimit = 64 << 10

func (r *rangeReader) Close() error {
	if r.rc != nil {
		if r.size-r.at <= drainLimit {
			// Best effort: the bytes are discarded, a failure only costs
			// the connection.
			io.Copy(io.Discard, io.LimitReader(r.body, drainLimit+1))
		}
		err := r.rc.Close()
		r.rc, r.body = nil, nil
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
