package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/stream"
)

// maxIndexBytes bounds the index.json the format commands read from a
// store (an index of a million shards is about 600 MB).
const maxIndexBytes = 1 << 30

// fetchAhead is the number of shards a remote dump or verify fetches ahead
// of the one it is working on; at most fetchAhead+1 shards' files are on
// local disk at once.
const fetchAhead = 4

// dataset is the dataset a format command (inspect, dump, verify, merge)
// works on: a local directory (a plain path or a file:// URL), or the root
// of a dataset in any store the registry knows, whose shard files are
// fetched into a temporary directory as they are needed and removed after.
type dataset struct {
	arg    string         // the argument, for messages
	local  string         // the directory of a local dataset, "" for a remote one
	bucket storage.Bucket // the store, with the standard decorators (limit, retry)
	// tarKeys are the shards of a tar dataset spec (a brace pattern or
	// "::" list); nil otherwise.
	tarKeys []string
}

// openDataset opens the dataset named by arg through e.registry, under the
// retry policy of the command's store flags (see withStoreFlags). It reads
// nothing yet.
func openDataset(ctx context.Context, e *env, arg string) (*dataset, error) {
	u, err := storage.ParseURL(arg)
	if err != nil {
		return nil, err
	}
	d := &dataset{arg: arg}
	if td, err := stream.ParseTarDataset(arg); err != nil {
		return nil, err
	} else if td != nil {
		// WebDataset tars: the dataset is the directory holding them.
		arg, d.tarKeys = td.Root, td.Keys
		if u, err = storage.ParseURL(arg); err != nil {
			return nil, err
		}
	}
	if u.Scheme == "file" {
		// As filestore reads file URLs: "file:///abs", "file://localhost/abs",
		// and "file://rel/dir" for a relative directory.
		d.local = u.Path
		if u.Opaque != "" {
			d.local = u.Opaque
		}
		if u.Host != "" && u.Host != "localhost" {
			d.local = u.Host + u.Path
		}
		if d.local == "" {
			d.local = "."
		}
	}
	if d.bucket, err = openStore(ctx, e, arg); err != nil {
		return nil, err
	}
	return d, nil
}

// Close releases the store.
func (d *dataset) Close() error { return d.bucket.Close() }

// readIndex reads and parses the dataset's index.json.
func (d *dataset) readIndex(ctx context.Context) (*format.Index, error) {
	if d.tarKeys != nil {
		return stream.ReadTarIndex(ctx, d.bucket, d.tarKeys)
	}
	b, err := storage.ReadAll(ctx, d.bucket, format.IndexFile, maxIndexBytes)
	if errors.Is(err, fs.ErrNotExist) {
		// A directory of WebDataset tars without an index: index them.
		if idx, terr := stream.ReadTarIndex(ctx, d.bucket, nil); terr == nil {
			return idx, nil
		}
	}
	if err != nil {
		return nil, err
	}
	idx, err := format.ParseIndex(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.bucket.URL(format.IndexFile), err)
	}
	return idx, nil
}

// fileStat is what the store holds for one file an index names.
type fileStat struct {
	size    int64 // -1 when the object is missing
	missing bool
}

// statFiles looks up every stored file of the index in the store, in
// parallel, and returns the results keyed by basename.
func (d *dataset) statFiles(ctx context.Context, idx *format.Index) (map[string]fileStat, error) {
	var keys []string
	for k := range idx.Shards {
		for _, f := range idx.Shards[k].Files() {
			keys = append(keys, f.Basename)
		}
	}
	out := make(map[string]fileStat, len(keys))
	var mu sync.Mutex
	err := forEachLimit(ctx, len(keys), 32, func(ctx context.Context, i int) error {
		info, err := d.bucket.Stat(ctx, keys[i])
		st := fileStat{size: info.Size}
		if errors.Is(err, fs.ErrNotExist) {
			st = fileStat{size: -1, missing: true}
		} else if err != nil {
			return err
		}
		mu.Lock()
		out[keys[i]] = st
		mu.Unlock()
		return nil
	})
	return out, err
}

// forEachLimit calls fn for 0..n-1, at most limit calls at once, and
// returns the first error; after it, calls not yet started are skipped
// and the running ones see a cancelled context.
func forEachLimit(ctx context.Context, n, limit int, fn func(ctx context.Context, i int) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(limit)
	for i := 0; i < n && gctx.Err() == nil; i++ {
		g.Go(func() error { return fn(gctx, i) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return ctx.Err()
}

// shardDir is a directory holding the stored files of one shard, under
// the basenames its index entry gives.
type shardDir struct {
	k   int
	dir string
	err error // the fetch failed (other than a missing file)
}

// eachShard calls fn for shards first..last-1 in index order, on the
// calling goroutine, with a local directory holding each shard's stored
// files. For a local dataset that is the dataset's directory. For a remote
// one the files are downloaded (storage.Download) into a temporary
// directory, up to fetchAhead shards ahead of the one fn works on, and
// removed once fn returns; a file missing from the store is simply absent
// from the directory, so the readers report it as they would locally. A
// failed download is passed to fn as fetchErr. The temporary directory is
// gone when eachShard returns. fn's error stops the walk and is returned.
func (d *dataset) eachShard(ctx context.Context, idx *format.Index, first, last int, fn func(k int, dir string, fetchErr error) error) error {
	if d.local != "" {
		for k := first; k < last; k++ {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := fn(k, d.local, nil); err != nil {
				return err
			}
		}
		return nil
	}
	if first >= last {
		return nil
	}
	tmp, err := os.MkdirTemp("", "sluice-fetch-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait() // before RemoveAll: no download still writes
	defer cancel()

	queue := make(chan chan shardDir, fetchAhead)
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(queue)
		for k := first; k < last; k++ {
			done := make(chan shardDir, 1)
			select {
			case queue <- done:
			case <-ctx.Done():
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				dir := filepath.Join(tmp, fmt.Sprint(k))
				done <- shardDir{k: k, dir: dir, err: d.fetchShard(ctx, &idx.Shards[k], dir)}
			}()
		}
	}()
	for done := range queue {
		var sd shardDir
		select {
		case sd = <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
		err := ctx.Err()
		if err == nil {
			err = fn(sd.k, sd.dir, sd.err)
		}
		os.RemoveAll(sd.dir)
		if err != nil {
			return err
		}
	}
	return ctx.Err()
}

// fetchShard downloads the stored files of shard info into dir, in
// parallel. Files missing from the store are skipped.
func (d *dataset) fetchShard(ctx context.Context, info *format.ShardInfo, dir string) error {
	files := info.Files()
	return forEachLimit(ctx, len(files), len(files), func(ctx context.Context, i int) error {
		fi := files[i]
		dst := filepath.Join(dir, filepath.FromSlash(fi.Basename))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		// The size is not passed on: a file of the wrong size is fetched
		// as it is, for the shard's reader to report.
		_, err := storage.Download(ctx, d.bucket, fi.Basename, dst, &storage.DownloadOptions{NoSync: true})
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	})
}

// shardOffsets returns the global index of each shard's first sample, with
// the total as the last element.
func shardOffsets(idx *format.Index) []int64 {
	off := make([]int64, len(idx.Shards)+1)
	for k := range idx.Shards {
		off[k+1] = off[k] + int64(idx.Shards[k].Samples)
	}
	return off
}

// locateShard returns the shard that holds global sample i (len(shards)
// when i is past the end), skipping empty shards.
func locateShard(off []int64, i int64) int {
	return sort.Search(len(off)-1, func(k int) bool { return off[k+1] > i })
}
