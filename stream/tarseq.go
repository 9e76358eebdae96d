package stream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sluicedata/sluice/cache"
	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/compress"
	"github.com/sluicedata/sluice/plan"
	"github.com/sluicedata/sluice/storage"
)

// TarSequence is a tar dataset streamed in WebDataset's own sequential
// way, without an index: each epoch the shard list is (optionally)
// shuffled with a seed derived from (ShuffleSeed, epoch), the same on
// every rank, then split by rank (WebDataset's split_by_node: shard i goes
// to rank i mod ranks) and within a rank by DataLoader worker
// (split_by_worker), and each worker reads its shards whole, samples in
// archive order. Shards still go through the node cache: its limit, one
// download per shard per node, leases, eviction that follows each
// worker's shard list.
//
// What it guarantees (see docs/format/wds.md): every sample once per
// epoch across all ranks and workers; an order that is a pure function of
// (shard list, seed, epoch, ranks, workers); resume from a TarSeqState on
// the same ranks × workers (exact: the state names the shard and the
// sample in it). It does not give equal sample counts per rank (a rank
// gets whole shards), elastic resume onto another shape, Get(i), or
// mixing with other streams: use Open (an index) for those.
type TarSequence struct {
	opts     Options
	spec     string
	cache    *cache.Cache // nil: shards read in place
	ownCache bool
	bucket   storage.Bucket // nil: local
	cds      *cache.Dataset
	root     string // local directory of in-place shards
	keys     []string
	sizes    []int64
	urls     []string // __url__ per shard, redacted
	seed     int64
	tarIndex tarIndexCache
}

// OpenTarSequence opens the tar dataset opts.Remote (a brace pattern,
// "::" list, .tar URL, or a directory/prefix of .tar objects; a local
// path reads the shards in place) for WebDataset-order streaming. It reads
// no tar and builds no index: it lists the store (or stats the files) for
// the shards' sizes, which the cache needs. Used options: Remote, Local,
// Cache, CacheLimit, CacheSharedGroup, Registry, DownloadRetry,
// DownloadTimeout, Retry, MaxInFlight, WaitTimeout, Shuffle (WebDataset's
// shardshuffle) and ShuffleSeed (default plan.DefaultShuffleSeed).
func OpenTarSequence(ctx context.Context, opts *Options) (_ *TarSequence, err error) {
	if opts == nil {
		return nil, errors.New("stream: nil Options")
	}
	o := *opts
	if o.Remote == "" {
		o.Remote = o.Local
	}
	if o.Remote == "" {
		return nil, errors.New("stream: tar sequence: Remote is required")
	}
	s := &TarSequence{opts: o, spec: o.Remote, seed: plan.DefaultShuffleSeed}
	if o.ShuffleSeed != nil {
		s.seed = *o.ShuffleSeed
	}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	root, spec, err := tarStreamRoot(o.Remote)
	if err != nil {
		return nil, err
	}
	remote := strings.Contains(root, "://") && !strings.HasPrefix(root, "file://")
	if !remote {
		return s, s.openLocal(strings.TrimPrefix(root, "file://"), spec)
	}
	if o.Registry == nil {
		return nil, fmt.Errorf("stream: opening %q needs a storage Registry", redactURL(o.Remote))
	}
	b, err := openStore(ctx, &o, root, o.DownloadTimeout)
	if err != nil {
		return nil, err
	}
	s.bucket = b
	if err := s.listRemote(ctx, spec); err != nil {
		return nil, err
	}
	for _, k := range s.keys {
		s.urls = append(s.urls, storage.RedactURL(b.URL(k)))
	}
	if o.Cache != nil {
		s.cache = o.Cache
	} else {
		dir := o.Local
		if dir == "" {
			dir = defaultLocal([]Stream{{Remote: o.Remote}})
		}
		c, err := cache.Open(ctx, dir, &cache.Options{Limit: o.CacheLimit, WaitTimeout: o.WaitTimeout, SharedGroup: o.CacheSharedGroup})
		if err != nil {
			return nil, fmt.Errorf("stream: %w", err)
		}
		s.cache, s.ownCache = c, true
	}
	rel := ""
	if o.Cache != nil || o.Local == "" {
		rel = dirName(o.Remote, "")
	}
	attempts := o.DownloadRetry
	if attempts < 0 {
		return nil, fmt.Errorf("stream: download_retry %d must be ≥ 0", attempts)
	}
	if attempts == 0 {
		attempts = 2
	}
	src := &cache.Source{Dir: rel, Bucket: b, Attempts: attempts, AttemptTimeout: o.DownloadTimeout,
		Decompress: func(comp string, dst io.Writer, r io.Reader, raw int64) error {
			_, err := compress.DecompressStream(dst, r, familyOf(comp), raw)
			return err
		}}
	for i, k := range s.keys {
		src.Shards = append(src.Shards, cache.Shard{Files: []cache.File{{Raw: k, RawBytes: s.sizes[i]}}})
	}
	if s.cds, err = s.cache.Add(ctx, src); err != nil {
		return nil, fmt.Errorf("stream: %w", err)
	}
	// One reader leases a shard while the next one is fetched.
	if err := s.cds.CheckLimit(1, 0); err != nil {
		return nil, fmt.Errorf("stream: %w", err)
	}
	return s, nil
}

// listRemote fills keys and sizes from one listing of the store root:
// the spec's keys in its order, or every .tar object, sorted.
func (s *TarSequence) listRemote(ctx context.Context, spec *tarSpec) error {
	want := map[string]int{}
	if spec != nil {
		s.keys = spec.keys
		s.sizes = make([]int64, len(spec.keys))
		for i, k := range spec.keys {
			if err := format.CheckBasename(k); err != nil {
				return fmt.Errorf("stream: tar shard: %w", err)
			}
			want[k] = i
			s.sizes[i] = -1
		}
	}
	var all []storage.ObjectInfo
	err := s.bucket.List(ctx, "", func(o storage.ObjectInfo) error {
		if spec != nil {
			if i, ok := want[o.Key]; ok {
				s.sizes[i] = o.Size
			}
			return nil
		}
		if isTarName(o.Key) {
			if len(all) >= format.MaxIndexShards {
				return fmt.Errorf("more than %d .tar objects", format.MaxIndexShards)
			}
			all = append(all, o)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("stream: list %s: %w", redactURL(s.bucket.URL("")), err)
	}
	if spec == nil {
		if len(all) == 0 {
			return fmt.Errorf("stream: %s holds no .tar objects: %w", redactURL(s.bucket.URL("")), storage.ErrNotExist)
		}
		keys := make([]string, len(all))
		for i, o := range all {
			keys[i] = o.Key
		}
		order := sortedOrder(keys)
		for _, i := range order {
			if err := format.CheckBasename(all[i].Key); err != nil {
				return fmt.Errorf("stream: tar shard: %w", err)
			}
			s.keys = append(s.keys, all[i].Key)
			s.sizes = append(s.sizes, all[i].Size)
		}
		return nil
	}
	for i, n := range s.sizes {
		if n < 0 {
			// Not listed (a store that lists lazily, or a missing shard).
			info, err := s.bucket.Stat(ctx, s.keys[i])
			if err != nil {
				return fmt.Errorf("stream: tar shard %s: %w", redactURL(s.bucket.URL(s.keys[i])), err)
			}
			s.sizes[i] = info.Size
		}
	}
	return nil
}

// openLocal fills keys, sizes and urls for shards read in place.
func (s *TarSequence) openLocal(root string, spec *tarSpec) error {
	s.root = root
	if spec != nil {
		s.keys = spec.keys
	} else {
		err := filepath.WalkDir(root, func(p string, e os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !e.IsDir() && isTarName(p) {
				rel, _ := filepath.Rel(root, p)
				s.keys = append(s.keys, filepath.ToSlash(rel))
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("stream: %w", err)
		}
		if len(s.keys) == 0 {
			return fmt.Errorf("stream: %s holds no .tar files: %w", root, os.ErrNotExist)
		}
		sort.Strings(s.keys)
	}
	for _, k := range s.keys {
		p := filepath.Join(root, filepath.FromSlash(k))
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("stream: tar shard: %w", err)
		}
		s.sizes = append(s.sizes, fi.Size())
		s.urls = append(s.urls, p)
	}
	return nil
}

// NumShards returns the number of shards.
func (s *TarSequence) NumShards() int { return len(s.keys) }

// ShardURL returns shard i's URL (its samples' __url__), credentials
// redacted.
func (s *TarSequence) ShardURL(i int) string { return s.urls[i] }

// Cache returns the node cache the shards go through; nil when they are
// read in place.
func (s *TarSequence) Cache() *cache.Cache { return s.cache }

// Close releases the store and, unless it was given, the cache.
// Iterators must be closed first.
func (s *TarSequence) Close() error {
	var errs []error
	if s.bucket != nil {
		errs = append(errs, s.bucket.Close())
	}
	if s.ownCache && s.cache != nil {
		errs = append(errs, s.cache.Close())
	}
	return errors.Join(errs...)
}

// TarSeqShape is where one reader sits: its global rank among Ranks and
// its DataLoader worker among Workers (Workers 0 or 1: the rank reads
// alone).
type TarSeqShape struct {
	Rank, Ranks     int
	Worker, Workers int
}

func (sh TarSeqShape) norm() (TarSeqShape, error) {
	if sh.Ranks <= 0 {
		sh.Ranks = 1
	}
	if sh.Workers <= 0 {
		sh.Workers = 1
	}
	if sh.Rank < 0 || sh.Rank >= sh.Ranks || sh.Worker < 0 || sh.Worker >= sh.Workers {
		return sh, fmt.Errorf("stream: tar sequence: rank %d of %d, worker %d of %d is out of range", sh.Rank, sh.Ranks, sh.Worker, sh.Workers)
	}
	if int64(sh.Ranks)*int64(sh.Workers) > 1<<20 {
		return sh, fmt.Errorf("stream: tar sequence: %d ranks × %d workers is too many", sh.Ranks, sh.Workers)
	}
	return sh, nil
}

// Shards returns the global shard IDs reader sh reads in epoch, in order:
// the epoch's shard order (shuffled with (seed, epoch) when Shuffle is
// set), every Ranks-th from Rank (split_by_node), of those every
// Workers-th from Worker (split_by_worker).
func (s *TarSequence) Shards(epoch int64, sh TarSeqShape) ([]int, error) {
	sh, err := sh.norm()
	if err != nil {
		return nil, err
	}
	order := make([]int, len(s.keys))
	for i := range order {
		order[i] = i
	}
	if s.opts.Shuffle {
		shuffleShards(order, s.seed, epoch)
	}
	var out []int
	for i := sh.Rank; i < len(order); i += sh.Ranks {
		if (i/sh.Ranks)%sh.Workers == sh.Worker {
			out = append(out, order[i])
		}
	}
	return out, nil
}

// shuffleShards permutes order by a Fisher–Yates shuffle driven by PCG
// seeded with (seed, epoch), with unbiased bounded draws: a pure
// function of its inputs, the same on every rank.
func shuffleShards(order []int, seed, epoch int64) {
	r := rand.New(rand.NewPCG(uint64(seed), uint64(epoch)^0x9e3779b97f4a7c15))
	for i := len(order) - 1; i > 0; i-- {
		n := uint64(i + 1)
		lim := -n % n // 2^64 mod n
		v := r.Uint64()
		for v < lim {
			v = r.Uint64()
		}
		j := int(v % n)
		order[i], order[j] = order[j], order[i]
	}
}

// TarSeqState is where a reader of a TarSequence stands: its epoch, its
// shape, the position in its shard list (Shards) and the samples of that
// shard already delivered. It resumes exactly on the same shape only.
type TarSeqState struct {
	Epoch   int64 `json:"epoch"`
	Ranks   int   `json:"ranks"`
	Workers int   `json:"workers"`
	Rank    int   `json:"rank"`
	Worker  int   `json:"worker"`
	Shard   int   `json:"shard"`  // position in the reader's shard list
	Sample  int   `json:"sample"` // samples of that shard delivered
}

// ErrTarSeqShape is matched by the error Iter returns for a resume state
// taken on another shape (the sequential order is not elastic).
var ErrTarSeqShape = errors.New("stream: a tar sequence state resumes only on the shape it was taken on")

// sortedOrder returns the indexes of keys in sorted key order.
func sortedOrder(keys []string) []int {
	idx := make([]int, len(keys))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return keys[idx[a]] < keys[idx[b]] })
	return idx
}
