package mds

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/compress"
	"github.com/sluicedata/sluice/format/hashing"
)

// ErrUnsafe is returned when a dataset has pkl columns and the reader was
// not told to allow them (MosaicML's allow_unsafe_types).
var ErrUnsafe = errors.New("mds: dataset has pkl (pickle) columns; set AllowUnsafeTypes to read them as raw bytes")

// Options tunes a Reader. A nil *Options means the defaults.
type Options struct {
	// AllowUnsafeTypes permits pkl columns. Their values are surfaced as
	// format.Pickle bytes and never executed. Default false: opening a
	// dataset with a pkl column fails with ErrUnsafe, as in MosaicML.
	AllowUnsafeTypes bool
	// ValidateHash names a hash algorithm to check when a shard is opened:
	// the stored file's digest (the compressed file's when the shard is
	// compressed, as MosaicML does) must match the index. "" (the
	// default) checks nothing.
	ValidateHash string
}

// Reader reads an MDS dataset from a local directory: its index.json and
// the shard files it names. Raw shards are memory-mapped; shards stored
// only compressed are decompressed into memory (bounded by the index's raw
// size) when first used.
//
// Opened shards stay open until Close, and compressed ones stay in memory
// decompressed, so random access over a dataset larger than memory should
// go through the stream package (bounded cache of raw files) instead. A
// Scanner opens each shard on its own and releases it when it moves on.
//
// A Reader is safe for concurrent use. Close releases every opened shard.
type Reader struct {
	dir     string
	idx     *format.Index
	opts    Options
	offsets []int64 // offsets[k] = first global sample of shard k; len = shards+1

	mu     sync.Mutex
	shards map[int]*shardEntry // guarded by mu
}

// shardEntry opens one shard once, without holding the Reader's lock, so
// that opening (or decompressing) one shard never blocks the others.
type shardEntry struct {
	once sync.Once
	s    *Shard
	err  error
}

// Open reads dir/index.json and returns a Reader over it.
func Open(dir string, opts *Options) (*Reader, error) {
	b, err := os.ReadFile(filepath.Join(dir, format.IndexFile))
	if err != nil {
		return nil, fmt.Errorf("mds: %w", err)
	}
	idx, err := format.ParseIndex(b)
	if err != nil {
		return nil, fmt.Errorf("mds: %s: %w", dir, err)
	}
	return NewReader(dir, idx, opts)
}

// NewReader returns a Reader over an already parsed index whose files live
// in dir. Every shard must be in MDS format.
func NewReader(dir string, idx *format.Index, opts *Options) (*Reader, error) {
	r := &Reader{dir: dir, idx: idx, shards: map[int]*shardEntry{}}
	if opts != nil {
		r.opts = *opts
	}
	if r.opts.ValidateHash != "" && !hashing.Valid(r.opts.ValidateHash) {
		return nil, fmt.Errorf("mds: unknown hash algorithm %q", r.opts.ValidateHash)
	}
	r.offsets = make([]int64, len(idx.Shards)+1)
	for k := range idx.Shards {
		s := &idx.Shards[k]
		if s.Format != "mds" {
			return nil, &format.CorruptError{File: format.IndexFile, Shard: k, Sample: -1, Offset: -1, Reason: fmt.Sprintf("format %q is not mds", s.Format)}
		}
		for i, e := range s.ColumnEncodings {
			enc, err := ParseEncoding(e)
			if err != nil {
				return nil, &format.CorruptError{File: format.IndexFile, Shard: k, Sample: -1, Offset: -1, Reason: fmt.Sprintf("column %q", s.ColumnNames[i]), Err: err}
			}
			if enc.Unsafe() && !r.opts.AllowUnsafeTypes {
				return nil, fmt.Errorf("%w (shard %d, column %q)", ErrUnsafe, k, s.ColumnNames[i])
			}
		}
		if s.Compression != "" && !compress.Valid(s.Family()) {
			return nil, &format.CorruptError{File: format.IndexFile, Shard: k, Sample: -1, Offset: -1, Reason: fmt.Sprintf("unsupported compression %q", s.Compression)}
		}
		r.offsets[k+1] = r.offsets[k] + int64(s.Samples)
	}
	return r, nil
}

// Index returns the parsed index. It must not be modified.
func (r *Reader) Index() *format.Index { return r.idx }

// Dir returns the dataset directory.
func (r *Reader) Dir() string { return r.dir }

// Len returns the total number of samples.
func (r *Reader) Len() int64 { return r.offsets[len(r.offsets)-1] }

// Locate maps global sample i to (shard, sample in shard) by binary search
// over the shards' prefix sums, O(log S). Negative i counts from the end.
func (r *Reader) Locate(i int64) (shard, j int, err error) {
	n := r.Len()
	if i < 0 {
		i += n
	}
	if i < 0 || i >= n {
		return 0, 0, fmt.Errorf("mds: sample %d out of range [0, %d)", i, n)
	}
	// The first shard whose end exceeds i; skips 0-sample shards.
	k := sort.Search(len(r.idx.Shards), func(k int) bool { return r.offsets[k+1] > i })
	return k, int(i - r.offsets[k]), nil
}

// Offset returns the global index of shard k's first sample.
func (r *Reader) Offset(k int) int64 { return r.offsets[k] }

// Shard returns shard k, opening it on first use. The Reader owns it: do
// not Close it.
func (r *Reader) Shard(k int) (*Shard, error) {
	if k < 0 || k >= len(r.idx.Shards) {
		return nil, fmt.Errorf("mds: shard %d out of range [0, %d)", k, len(r.idx.Shards))
	}
	r.mu.Lock()
	e, ok := r.shards[k]
	if !ok {
		e = &shardEntry{}
		r.shards[k] = e
	}
	r.mu.Unlock()
	e.once.Do(func() { e.s, e.err = r.openShard(k) })
	if e.err != nil {
		// Forget the failure, so a later call tries again.
		r.mu.Lock()
		if r.shards[k] == e {
			delete(r.shards, k)
		}
		r.mu.Unlock()
		return nil, e.err
	}
	return e.s, nil
}

// openShard opens shard k without caching it.
func (r *Reader) openShard(k int) (*Shard, error) {
	info := &r.idx.Shards[k]
	rawPath := filepath.Join(r.dir, filepath.FromSlash(info.RawData.Basename))
	if info.ZipData == nil {
		if err := r.checkHash(k, rawPath, &info.RawData); err != nil {
			return nil, err
		}
		s, err := OpenFile(rawPath, info)
		if err != nil {
			return nil, withShard(err, k)
		}
		s.id = k
		return s, nil
	}
	// Prefer a raw file already present (for example one a cache
	// decompressed), else decompress the zip form.
	if fi, err := os.Stat(rawPath); err == nil && fi.Size() == info.RawData.Bytes && r.opts.ValidateHash == "" {
		s, err := OpenFile(rawPath, info)
		if err != nil {
			return nil, withShard(err, k)
		}
		s.id = k
		return s, nil
	}
	zipPath := filepath.Join(r.dir, filepath.FromSlash(info.ZipData.Basename))
	zb, err := readSized(k, zipPath, info.ZipData)
	if err != nil {
		return nil, err
	}
	if err := r.checkHashBytes(k, zb, info.ZipData); err != nil {
		return nil, err
	}
	raw, err := compress.Decompress(info.Family(), zb, info.RawData.Bytes)
	if err != nil {
		return nil, &format.CorruptError{File: info.ZipData.Basename, Shard: k, Sample: -1, Offset: -1, Reason: "decompress", Err: err}
	}
	s, err := OpenBytes(raw, info)
	if err != nil {
		return nil, withShard(err, k)
	}
	s.id = k
	return s, nil
}

// readSized reads shard k's file at path, which the index says has fi.Bytes
// bytes. The size is checked before anything is read, so a wrong file cannot
// make the reader allocate more than the index declares.
func readSized(k int, path string, fi *format.FileInfo) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("mds: shard %d: %w", k, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("mds: shard %d: %w", k, err)
	}
	if st.Size() != fi.Bytes {
		return nil, &format.CorruptError{File: fi.Basename, Shard: k, Sample: -1, Offset: -1,
			Reason: fmt.Sprintf("file has %d bytes, index says %d", st.Size(), fi.Bytes)}
	}
	b := make([]byte, st.Size())
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, fmt.Errorf("mds: shard %d: read %s: %w", k, fi.Basename, err)
	}
	return b, nil
}

func withShard(err error, k int) error {
	var ce *format.CorruptError
	if errors.As(err, &ce) && ce.Shard < 0 {
		ce.Shard = k
	}
	return err
}

func (r *Reader) checkHash(k int, path string, fi *format.FileInfo) error {
	if r.opts.ValidateHash == "" {
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("mds: shard %d: %w", k, err)
	}
	return r.checkHashBytes(k, b, fi)
}

func (r *Reader) checkHashBytes(k int, b []byte, fi *format.FileInfo) error {
	algo := r.opts.ValidateHash
	if algo == "" {
		return nil
	}
	want, ok := fi.Hashes[algo]
	if !ok {
		return fmt.Errorf("mds: shard %d: %s has no %s hash in the index", k, fi.Basename, algo)
	}
	got, err := hashing.Sum(algo, b)
	if err != nil {
		return err
	}
	if got != want {
		return &format.CorruptError{File: fi.Basename, Shard: k, Sample: -1, Offset: -1,
			Reason: fmt.Sprintf("checksum failure: %s is %s, index says %s", algo, got, want)}
	}
	return nil
}

// Sample decodes global sample i (negative counts from the end).
func (r *Reader) Sample(i int64) (format.Sample, error) {
	k, j, err := r.Locate(i)
	if err != nil {
		return nil, err
	}
	s, err := r.Shard(k)
	if err != nil {
		return nil, err
	}
	return s.Sample(j)
}

// Record returns global sample i's record bytes, a view valid until Close.
func (r *Reader) Record(i int64) ([]byte, error) {
	k, j, err := r.Locate(i)
	if err != nil {
		return nil, err
	}
	s, err := r.Shard(k)
	if err != nil {
		return nil, err
	}
	return s.Record(j)
}

// Close closes every shard the Reader opened.
func (r *Reader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	for k, e := range r.shards {
		e.once.Do(func() { e.err = errors.New("mds: reader closed") })
		if e.s != nil {
			errs = append(errs, e.s.Close())
		}
		delete(r.shards, k)
	}
	return errors.Join(errs...)
}

// Scanner iterates a Reader's samples in order, opening each shard once
// and closing it when done:
//
//	sc := r.Scan(0)
//	for sc.Next() {
//		use(sc.Sample())
//	}
//	if err := sc.Err(); err != nil { ... }
//
// A Scanner is not safe for concurrent use.
type Scanner struct {
	r      *Reader
	next   int64
	k      int
	shard  *Shard
	rec    []byte
	sample format.Sample
	decode bool
	err    error
}

// Scan returns a Scanner starting at global sample from that decodes every
// sample (see RawScan for records only).
func (r *Reader) Scan(from int64) *Scanner {
	return &Scanner{r: r, next: from, k: -1, decode: true}
}

// RawScan returns a Scanner starting at from that does not decode: use
// Record for each sample's bytes.
func (r *Reader) RawScan(from int64) *Scanner {
	return &Scanner{r: r, next: from, k: -1}
}

// Next advances to the next sample. It returns false at the end or on an
// error (see Err).
func (sc *Scanner) Next() bool {
	if sc.err != nil || sc.next >= sc.r.Len() {
		sc.closeShard()
		return false
	}
	if sc.next < 0 {
		sc.err = fmt.Errorf("mds: scan from %d", sc.next)
		return false
	}
	k, j, err := sc.r.Locate(sc.next)
	if err != nil {
		sc.err = err
		return false
	}
	if k != sc.k {
		sc.closeShard()
		if sc.shard, sc.err = sc.r.openShard(k); sc.err != nil {
			return false
		}
		sc.k = k
	}
	if sc.rec, sc.err = sc.shard.Record(j); sc.err != nil {
		return false
	}
	if sc.decode {
		sc.sample = make(format.Sample, len(sc.shard.cols))
		if sc.err = sc.shard.DecodeInto(j, sc.sample); sc.err != nil {
			return false
		}
	}
	sc.next++
	return true
}

func (sc *Scanner) closeShard() {
	if sc.shard != nil {
		sc.shard.Close()
		sc.shard, sc.k = nil, -1
	}
}

// Index returns the global index of the current sample.
func (sc *Scanner) Index() int64 { return sc.next - 1 }

// ShardIndex returns the shard of the current sample.
func (sc *Scanner) ShardIndex() int { return sc.k }

// CurrentShard returns the open shard of the current sample (owned by the
// Scanner).
func (sc *Scanner) CurrentShard() *Shard { return sc.shard }

// Record returns the current sample's record, valid until the next call to
// Next.
func (sc *Scanner) Record() []byte { return sc.rec }

// Sample returns the current decoded sample (nil for a RawScan).
func (sc *Scanner) Sample() format.Sample { return sc.sample }

// Err returns the first error met.
func (sc *Scanner) Err() error { return sc.err }

// Close releases the Scanner's open shard; it is needed only when stopping
// before the end.
func (sc *Scanner) Close() error {
	sc.closeShard()
	return nil
}
