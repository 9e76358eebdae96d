package stream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/wds"
	"github.com/sluicedata/sluice/storage"
)

// A tar dataset is a stream whose Remote names WebDataset .tar shards: a
// brace pattern ("s3://b/train/shard-{000000..001399}.tar"), a "::"
// separated list, a single .tar, or a directory holding .tar objects and
// no index.json. Its index.json (format wds, see BuildTarIndex) is read
// from beside the shards when one there lists them all (sluice index writes
// it), and otherwise built from the shards' headers; either way it is then
// cached like an MDS index, and the shards go through the same cache,
// plan, prefetch and resume.

// tarStreamRoot returns the store root to open for remote and the tar
// spec it names (nil for an ordinary dataset directory).
func tarStreamRoot(remote string) (string, *tarSpec, error) {
	spec, err := parseTarSpec(remote)
	if err != nil || spec == nil {
		return remote, nil, err
	}
	return spec.root, spec, nil
}

// readStreamIndex returns the bytes of a remote stream's index.json: read
// from the store, or, for a tar dataset (spec, or a directory of .tar
// objects without an index), selected from the index beside the shards
// or built from their headers (built: the number of shards scanned). ok
// reports that info is what the response to the GET of the store's
// index.json (read as it is, or selected from) told of it; a built index
// has no index.json in the store to ask about.
func readStreamIndex(ctx context.Context, b storage.Bucket, spec *tarSpec) (_ []byte, info storage.ObjectInfo, ok bool, built int, _ error) {
	raw, info, ok, err := storage.ReadAllInfo(ctx, b, format.IndexFile, maxIndexBytes)
	if spec == nil {
		if !errors.Is(err, fs.ErrNotExist) {
			return raw, info, ok && err == nil, 0, err
		}
		keys, lerr := listTars(ctx, b)
		if lerr != nil || len(keys) == 0 {
			return nil, storage.ObjectInfo{}, false, 0, err // not a tar directory: report the missing index
		}
		spec = &tarSpec{spec: b.URL(""), keys: keys}
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, storage.ObjectInfo{}, false, 0, err
	}
	if err == nil {
		if idx, perr := format.ParseIndex(raw); perr == nil {
			if sel, sok := selectTarIndex(idx, spec.keys); sok {
				return format.AppendIndex(nil, sel), info, ok, 0, nil
			}
		}
	}
	idx, err := BuildTarIndex(ctx, b, spec.keys, nil)
	if err != nil {
		return nil, storage.ObjectInfo{}, false, 0, fmt.Errorf("index tar shards of %s: %w", spec.spec, err)
	}
	return format.AppendIndex(nil, idx), storage.ObjectInfo{}, false, len(spec.keys), nil
}

// TarDataset is a parsed tar dataset spec: the store root (a URL or
// directory) that holds every shard, and the shard keys under it in
// dataset order.
type TarDataset struct {
	Root string
	Keys []string
}

// ParseTarDataset parses a tar dataset spec (see ExpandTarURLs). It returns
// nil and no error when remote is not one: not a "::" list, brace pattern
// or .tar URL.
func ParseTarDataset(remote string) (*TarDataset, error) {
	spec, err := parseTarSpec(remote)
	if err != nil || spec == nil {
		return nil, err
	}
	return &TarDataset{Root: spec.root, Keys: spec.keys}, nil
}

// ReadTarIndex returns the index of a tar dataset under b: when keys is
// nil, every .tar object under b; the entries of b's index.json when it
// lists every key as a tar shard; else built from the shards' headers
// (BuildTarIndex).
func ReadTarIndex(ctx context.Context, b storage.Bucket, keys []string) (*format.Index, error) {
	spec := &tarSpec{spec: b.URL(""), keys: keys}
	if keys == nil {
		spec = nil
	}
	raw, _, _, _, err := readStreamIndex(ctx, b, spec)
	if err != nil {
		return nil, err
	}
	idx, err := format.ParseIndex(raw)
	if err != nil {
		return nil, fmt.Errorf("stream: %s: %w", b.URL(format.IndexFile), err)
	}
	return idx, nil
}

// ShardURL returns where a global shard comes from: its URL in the store,
// or its path for a local stream, with any credentials redacted
// (storage.RedactURL). For a tar shard it is WebDataset's __url__ of its
// samples: the URL as the spec names it, after brace expansion.
func (d *Dataset) ShardURL(shard int) string {
	ref := d.shards[shard]
	st := d.streams[ref.stream]
	if st.bucket == nil {
		return filepath.Join(st.dir, filepath.FromSlash(st.basename(ref.local)))
	}
	return storage.RedactURL(strings.TrimPrefix(st.bucket.URL(st.basename(ref.local)), "file://"))
}

// tarIndexCache keeps each tar shard file's scanned sample layout, keyed by
// path and checked against its size and modification time, so that
// reopening a shard (every epoch, every random access after its last reader
// closed it) does not scan its headers again. It holds at most one entry
// per shard file of the dataset (about 100 bytes per sample).
type tarIndexCache struct {
	m sync.Map // path → tarIndexEntry
}

type tarIndexEntry struct {
	size, mtime int64
	idx         *wds.FileIndex
}

func (c *tarIndexCache) open(path string, info *format.ShardInfo) (*wds.File, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	want := tarIndexEntry{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	var idx *wds.FileIndex
	if v, ok := c.m.Load(path); ok {
		if e := v.(tarIndexEntry); e.size == want.size && e.mtime == want.mtime {
			idx = e.idx
		}
	}
	f, err := wds.OpenFileIndexed(path, info, nil, idx)
	if err != nil {
		return nil, err
	}
	if idx == nil {
		want.idx = f.Index()
		c.m.Store(path, want)
	}
	return f, nil
}

// checkTarIndexFresh is checkIndexFresh for a tar spec, whose cached index
// is the selection of the store's index.json for the spec's shards (or was
// built from their headers): when the store's index.json is newer than the
// cached copy, the selection is made again and must give the same entries.
func checkTarIndexFresh(ctx context.Context, b storage.Bucket, local string, cached []byte, spec *tarSpec) error {
	fi, err := os.Stat(local)
	if err != nil {
		return fmt.Errorf("stream: %w", err)
	}
	info, err := b.Stat(ctx, format.IndexFile)
	if errors.Is(err, storage.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stream: check %s against the cached copy: %w", b.URL(format.IndexFile), err)
	}
	if info.ModTime.IsZero() || !info.ModTime.After(fi.ModTime().Add(time.Second)) {
		return nil
	}
	raw, err := storage.ReadAll(ctx, b, format.IndexFile, maxIndexBytes)
	if err != nil {
		return fmt.Errorf("stream: check %s against the cached copy: %w", b.URL(format.IndexFile), err)
	}
	if idx, err := format.ParseIndex(raw); err == nil {
		if sel, ok := selectTarIndex(idx, spec.keys); ok && bytes.Equal(format.AppendIndex(nil, sel), cached) {
			return nil
		}
	}
	return fmt.Errorf("stream: %s: %w: its entries for %s differ from the cached copy %s (remove the cache directory, or use another, to stream the new dataset)",
		b.URL(format.IndexFile), ErrIndexChanged, spec.spec, local)
}

// OpenWarnings returns advice for the user about how Open went: for each
// tar stream whose index Open built by scanning its shards' headers (no
// index.json beside them lists them), what that costs and how to avoid
// it. A later Open on the node finds the built index in the cache and
// scans nothing.
func (d *Dataset) OpenWarnings() []string {
	var out []string
	for _, st := range d.streams {
		if st.builtIndex == 0 {
			continue
		}
		spec := st.bucket.URL("")
		if st.tar != nil {
			spec = st.tar.spec
		}
		if strings.ContainsAny(spec, "@?") {
			spec = storage.RedactURL(spec) // (which would escape a pattern's braces)
		}
		out = append(out, fmt.Sprintf("%s: no index.json lists these %d tar shards, so this node read their headers to index them "+
			"(tars of small members are read whole for it, then downloaded again as they are streamed); "+
			"run `sluice index '%s'` once to write an index.json beside them", spec, st.builtIndex, spec))
	}
	return out
}
