package stream

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/sluicedata/sluice/cache"
	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/storage"
)

// loadIndex reads a remote stream's index into st: the cached copy when
// there is one (as MosaicML does, even if stale), else downloaded. It
// returns the index's size in the cache (-1 for a tar dataset's) and, for
// a downloaded index, cacheIndex, which puts it into the cache: call it
// once the stream is registered with the cache, before any of its shards
// is fetched. A cached index.json is parsed as it is read, never held
// whole.
func (d *Dataset) loadIndex(ctx context.Context, st *streamState, rel string) (size int64, cacheIndex func() error, err error) {
	local := filepath.Join(st.dir, format.IndexFile)
	// An earlier Open in this process may be writing it (WriteFileBehind):
	// find it in place then. A failed write: download it again below.
	// (A cache this Open is opening writes nothing yet.)
	if d.behind == nil {
		_ = d.cache.WaitWrite(ctx, filepath.ToSlash(filepath.Join(rel, format.IndexFile)))
	}
	var b []byte
	if st.tar != nil {
		b, err = os.ReadFile(local)
	} else {
		_, err = os.Stat(local)
	}
	if errors.Is(err, fs.ErrNotExist) {
		var got storage.ObjectInfo
		var told bool
		rctx, stop := ctx, func() {}
		if d.behind != nil {
			rctx, stop = d.behind.guard(ctx)
		}
		b, got, told, st.builtIndex, err = readStreamIndex(rctx, capIndex(st.bucket, d.opts.MaxIndexBytes), st.tar)
		stop()
		if err != nil {
			return 0, nil, fmt.Errorf("stream: read index: %w", err)
		}
		idx, err := parseIndex(st.bucket.URL(format.IndexFile), b)
		if err != nil {
			return 0, nil, err
		}
		// Fail before caching anything when the limit cannot hold the
		// index plus one shard leased and one being fetched.
		if lim := d.cacheLimit(); lim > 0 {
			var foot int64
			for i := range idx.Len() {
				_, raw, _ := idx.File(i, format.RawData)
				_, zip, zipped := idx.File(i, format.ZipData)
				_, rawMeta, _ := idx.File(i, format.RawMeta)
				_, zipMeta, zippedMeta := idx.File(i, format.ZipMeta)
				// ShardInfo.Files (the compressed forms where there
				// are), plus the raw forms of a compressed shard.
				data, meta := raw, rawMeta
				if zipped {
					data = zip
				}
				if zippedMeta {
					meta = zipMeta
				}
				n := data + meta
				if zipped {
					n += raw + rawMeta
				}
				foot = max(foot, n)
			}
			if need := int64(len(b)) + 2*foot; need > lim {
				return 0, nil, fmt.Errorf("stream: %w", &cache.LimitError{Dir: d.cacheRoot(), Limit: lim, Min: need,
					Reason: fmt.Sprintf("the index (%d bytes) plus one leased shard and one being fetched, of up to %d bytes each", len(b), foot)})
			}
		}
		n := int64(len(b))
		if st.tar != nil {
			n = -1 // a selection of the store's index, or one built
		}
		// What the store records of the index (ModTime, ETag), recorded
		// in the background once it is written (best effort; Close waits
		// for it): what the GET's response told of it (nothing for a tar
		// index built from the shards: the store has no index.json), or
		// else asked for (Stat) while the index is written to the cache,
		// so that neither delays the first shard's download.
		stated := make(chan storage.ObjectInfo, 1)
		switch {
		case st.builtIndex > 0:
			close(stated) // no index.json in the store
		case told && (n < 0 || got.Size == n):
			stated <- got
			close(stated)
		default:
			d.bg.Add(1)
			go func() {
				defer d.bg.Done()
				defer close(stated)
				if info, ok := statIndex(ctx, st.bucket, n); ok {
					stated <- info
				}
			}()
		}
		// The index goes into the cache behind the first downloads: its
		// room is reserved before any of its shards is fetched (so that
		// under a tight limit it never waits for room held by early
		// shards whose commits wait for it), and the write, sync and
		// rename run in the background, which nothing cuts short (Close
		// waits for them). The cache renames no shard into place before
		// the index is, and none if its write fails, so a crash leaves no
		// shard without its index, while the first shard's download and
		// early read need not wait for the index's sync (1.8 ms of a
		// ~11 ms time to first sample). It starts after the stream's
		// registration, whose manifest sync would wait for it.
		cacheIndex = func() error {
			wait, err := d.cache.WriteFileBehind(filepath.ToSlash(filepath.Join(rel, format.IndexFile)), b)
			if err != nil {
				return fmt.Errorf("stream: caching %s: %w", format.IndexFile, err)
			}
			st.indexWritten = wait
			d.bg.Add(1)
			go func() {
				defer d.bg.Done()
				err := wait()
				info, ok := <-stated
				if err != nil || !ok {
					return
				}
				stampIndex(local, info)
				if info.ETag != "" && st.tar == nil {
					// Best effort, as the mtime: without it the size and
					// time decide. Not cut short by the end of Open's
					// context, but Close does not wait for its room: a
					// cache full of shards leased (by Locations, or by
					// another dataset of a shared cache) kept Close
					// waiting for the minute. From Close on, the write
					// takes the room free then or is left out.
					wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
					defer cancel()
					defer context.AfterFunc(d.closing, cancel)()
					_ = d.cache.WriteFile(wctx, filepath.ToSlash(filepath.Join(rel, format.IndexFile+indexETagSuffix)), []byte(info.ETag))
				}
			}()
			return nil
		}
		st.setCompact(idx)
		return int64(len(b)), cacheIndex, nil
	} else if err != nil {
		return 0, nil, fmt.Errorf("stream: %w", err)
	} else if st.tar != nil {
		// The cached index is a selection of the store's (or built).
		if err := checkTarIndexFresh(ctx, st.bucket, local, b, st.tar); err != nil {
			return 0, nil, err
		}
		idx, err := parseIndex(local, b)
		if err != nil {
			return 0, nil, err
		}
		st.setCompact(idx)
		return int64(len(b)), nil, nil
	}
	if err := checkIndexFresh(ctx, st.bucket, local); err != nil {
		return 0, nil, err
	}
	idx, n, err := readIndexFile(local)
	if err != nil {
		return 0, nil, err
	}
	st.setCompact(idx)
	return n, nil, nil
}

// parseIndex parses an index.json named name (its URL or path, for
// errors) into the compact layout: the stream makes a shard's ShardInfo
// only when it uses it (streamState.info).
func parseIndex(name string, b []byte) (*format.CompactIndex, error) {
	c, err := format.ParseCompactIndex(b)
	if err != nil {
		if looksLikeHTML(b) {
			return nil, fmt.Errorf("stream: %s: %w", name, ErrHTML)
		}
		return nil, fmt.Errorf("stream: %s: %w", name, err)
	}
	if c.Len() == 0 {
		return nil, fmt.Errorf("stream: %s: no shards", name)
	}
	return c, nil
}

// readIndexFile parses the index.json at path as it reads it, its
// columns sized from the file's length, with parseIndex's errors. It
// returns the file's size.
func readIndexFile(path string) (*format.CompactIndex, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, fmt.Errorf("stream: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, fmt.Errorf("stream: %w", err)
	}
	c, err := format.ReadCompactIndexSize(f, fi.Size())
	if err != nil {
		head := make([]byte, 512)
		n, _ := f.ReadAt(head, 0)
		if looksLikeHTML(head[:n]) {
			return nil, 0, fmt.Errorf("stream: %s: %w", path, ErrHTML)
		}
		return nil, 0, fmt.Errorf("stream: %s: %w", path, err)
	}
	if c.Len() == 0 {
		return nil, 0, fmt.Errorf("stream: %s: no shards", path)
	}
	return c, fi.Size(), nil
}
