package split

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/compress"
	"github.com/sluicedata/sluice/format/hashing"
	"github.com/sluicedata/sluice/internal/atomicfile"
)

// Options configures a Writer. The format packages fill it from their own
// documented options.
type Options struct {
	// Prefix starts every error message ("jsonl", "xsv").
	Prefix string
	// Template is the shard entry without files and sample count: Format
	// and the format's own keys (Columns, or ColumnNames and
	// ColumnEncodings, Newline, Separator). NewWriter sets Version,
	// Compression, Hashes and SizeLimit.
	Template format.ShardInfo
	// Header is written at the start of every data file (the XSV column
	// line); it does not count towards the size limit.
	Header []byte
	// Compression, Hashes, SizeLimit, OnFileDone, ExistOK, NoEmptyShards
	// and Parallelism mean what they mean in mds.WriterOptions.
	Compression   string
	Hashes        []string
	SizeLimit     int64
	OnFileDone    func(basename, localPath string) error
	ExistOK       bool
	NoEmptyShards bool
	Parallelism   int
}

// Writer runs the split-format shard pipeline: callers append encoded
// records to Buffer's slice and hand it back with Commit; the Writer does
// MosaicML's size accounting and flushing (spec 6.2, 6.3 and 7: only
// record bytes count, the 0-sample shard quirk included unless
// NoEmptyShards), builds each shard's data and meta files, and hashes,
// compresses and writes them (temp file, fsync, rename) on background
// goroutines, committing shards in order. Finish writes index.json last.
//
// A Writer is not safe for concurrent use. Errors are sticky.
type Writer struct {
	dir    string
	opts   Options
	cfg    []byte // config JSON for the meta files
	limit  int64
	zip    *compress.Compressor
	family string

	body    []byte  // the current data file: header, then records
	ends    []int64 // end of each record in body
	shardNo int

	sem    chan struct{}
	queue  chan *job
	done   chan struct{}
	free   chan []byte
	failed atomic.Bool
	mu     sync.Mutex
	err    error              // sticky; guarded by mu
	shards []format.ShardInfo // guarded by mu
	closed bool
}

type job struct {
	info  format.ShardInfo
	data  []byte
	meta  []byte
	names [2]string // stored basenames: data, meta
	paths [2]string
	err   error
	done  chan struct{}
}

// NewWriter validates opts and returns a Writer for dir, which is created
// if needed.
func NewWriter(dir string, opts Options) (*Writer, error) {
	p := opts.Prefix
	w := &Writer{dir: dir, opts: opts}
	t := &w.opts.Template
	t.Version = 2
	if _, err := compress.Parse(opts.Compression); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	t.Compression = opts.Compression
	if opts.Compression != "" {
		z, err := compress.NewCompressor(opts.Compression)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		w.zip, w.family = z, z.Spec().Family
	}
	if !sort.StringsAreSorted(opts.Hashes) {
		return nil, fmt.Errorf("%s: hashes must be unique and in sorted order", p)
	}
	for _, h := range opts.Hashes {
		if !hashing.Valid(h) {
			return nil, fmt.Errorf("%s: unknown hash algorithm %q", p, h)
		}
	}
	t.Hashes = append([]string{}, opts.Hashes...)
	if opts.SizeLimit >= 1<<32 {
		return nil, fmt.Errorf("%s: size limit %d must be below 2^32", p, opts.SizeLimit)
	}
	if opts.SizeLimit > 0 {
		w.limit = opts.SizeLimit
		t.SizeLimit = opts.SizeLimit
	}
	if int64(len(opts.Header)) > MaxDataBytes {
		return nil, fmt.Errorf("%s: header of %d bytes is too large", p, len(opts.Header))
	}
	w.cfg = format.AppendConfig(nil, t)
	w.body = append(make([]byte, 0, 64<<10), opts.Header...)

	if err := os.MkdirAll(dir, 0o755); err != nil {
		if w.zip != nil {
			w.zip.Close()
		}
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	if !opts.ExistOK {
		ents, err := os.ReadDir(dir)
		if err == nil && len(ents) > 0 {
			err = fmt.Errorf("output directory %s is not empty", dir)
		}
		if err != nil {
			if w.zip != nil {
				w.zip.Close()
			}
			return nil, fmt.Errorf("%s: %w", p, err)
		}
	}
	par := opts.Parallelism
	if par <= 0 {
		par = runtime.GOMAXPROCS(0)
	}
	w.sem = make(chan struct{}, par)
	w.queue = make(chan *job, par)
	w.free = make(chan []byte, 2*par+1)
	w.done = make(chan struct{})
	go w.commit()
	return w, nil
}

// Config returns the config JSON the meta files carry.
func (w *Writer) Config() []byte { return w.cfg }

// Err returns the sticky error, nil if none.
func (w *Writer) Err() error {
	if !w.failed.Load() {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

func (w *Writer) fail(err error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = err
		w.failed.Store(true)
	}
	return w.err
}

// Buffer returns the current data file's bytes. Append one encoded
// record to it and pass the result to Commit; if encoding fails, simply
// do not call Commit.
func (w *Writer) Buffer() ([]byte, error) {
	if err := w.Err(); err != nil {
		return nil, err
	}
	if w.closed {
		return nil, fmt.Errorf("%s: write after Finish", w.opts.Prefix)
	}
	return w.body, nil
}

// Commit takes body (Buffer's slice with one record appended) and adds the
// record to the current shard, first flushing the shard if the record
// would take it past the size limit.
func (w *Writer) Commit(body []byte) error {
	start := len(w.body)
	n := int64(len(body) - start)
	hdr := int64(len(w.opts.Header))
	if hdr+n > MaxDataBytes {
		return fmt.Errorf("%s: record of %d bytes cannot fit in a shard (4 GiB offsets)", w.opts.Prefix, n)
	}
	w.body = body
	size := int64(start) - hdr // record bytes already in the shard
	overLimit := w.limit > 0 && w.limit < size+n
	overMax := hdr+size+n > MaxDataBytes // no limit: split rather than wrap offsets
	if (overLimit || overMax) && (len(w.ends) > 0 || !w.opts.NoEmptyShards) {
		rec := append([]byte(nil), body[start:]...)
		w.body = body[:start]
		if err := w.flush(); err != nil {
			return err
		}
		w.body = append(w.body, rec...)
	}
	w.ends = append(w.ends, int64(len(w.body)))
	return nil
}

// flush hands the current shard to the background pipeline; the data
// buffer goes with the job and a recycled one takes its place.
func (w *Writer) flush() error {
	hdr := len(w.opts.Header)
	j := &job{info: w.opts.Template, data: w.body, done: make(chan struct{})}
	j.meta = AppendMeta(make([]byte, 0, 8+4*len(w.ends)+len(w.cfg)), int64(hdr), w.ends, w.cfg)
	j.info.Samples = len(w.ends)
	base := fmt.Sprintf("shard.%05d.%s", w.shardNo, w.opts.Template.Format)
	j.info.RawData = format.FileInfo{Basename: base, Bytes: int64(len(w.body))}
	j.info.RawMeta = &format.FileInfo{Basename: base + ".meta", Bytes: int64(len(j.meta))}
	w.shardNo++

	var next []byte
	select {
	case next = <-w.free:
	default:
	}
	if cap(next) < len(w.body) {
		next = make([]byte, 0, max(cap(w.body), 64<<10))
	}
	w.body = append(next[:0], w.opts.Header...)
	w.ends = w.ends[:0]

	w.sem <- struct{}{}
	go func() {
		defer func() { <-w.sem; close(j.done) }()
		j.err = w.process(j)
		select {
		case w.free <- j.data[:0]:
		default:
		}
		j.data, j.meta = nil, nil
	}()
	w.queue <- j
	return w.Err()
}

// process hashes, compresses and writes one shard's two files.
func (w *Writer) process(j *job) error {
	raws := [2]*format.FileInfo{&j.info.RawData, j.info.RawMeta}
	zips := [2]**format.FileInfo{&j.info.ZipData, &j.info.ZipMeta}
	for i, b := range [2][]byte{j.data, j.meta} {
		var err error
		if raws[i].Hashes, err = hashing.SumAll(j.info.Hashes, b); err != nil {
			return err
		}
		name, out := raws[i].Basename, b
		if w.zip != nil {
			zb, err := w.zip.Compress(make([]byte, 0, compress.Bound(len(b))), b)
			if err != nil {
				return fmt.Errorf("%s: compress %s: %w", w.opts.Prefix, name, err)
			}
			name += "." + w.family
			zi := &format.FileInfo{Basename: name, Bytes: int64(len(zb))}
			if zi.Hashes, err = hashing.SumAll(j.info.Hashes, zb); err != nil {
				return err
			}
			*zips[i] = zi
			out = zb
		}
		j.names[i] = name
		j.paths[i] = filepath.Join(w.dir, name)
		if err := atomicfile.WriteFile(j.paths[i], 0o644, out); err != nil {
			return fmt.Errorf("%s: %w", w.opts.Prefix, err)
		}
	}
	return nil
}

// commit receives finished jobs in shard order.
func (w *Writer) commit() {
	defer close(w.done)
	for j := range w.queue {
		<-j.done
		if w.Err() != nil {
			continue
		}
		if j.err != nil {
			w.fail(j.err)
			continue
		}
		if w.opts.OnFileDone != nil {
			var err error
			for i := range j.names {
				if err = w.opts.OnFileDone(j.names[i], j.paths[i]); err != nil {
					err = fmt.Errorf("%s: after writing %s: %w", w.opts.Prefix, j.names[i], err)
					break
				}
			}
			if err != nil {
				w.fail(err)
				continue
			}
		}
		w.mu.Lock()
		w.shards = append(w.shards, j.info)
		w.mu.Unlock()
	}
}

// Finish flushes the last shard, waits for every shard's files, then
// writes index.json (and calls OnFileDone for it). A writer that received
// no record writes an index with no shards.
func (w *Writer) Finish() error {
	if w.closed {
		return w.Err()
	}
	if w.Err() == nil && len(w.ends) > 0 {
		w.flush()
	}
	w.shutdown()
	if err := w.Err(); err != nil {
		return err
	}
	idx := &format.Index{Shards: w.shards}
	if idx.Shards == nil {
		idx.Shards = []format.ShardInfo{}
	}
	path := filepath.Join(w.dir, format.IndexFile)
	if err := atomicfile.WriteFile(path, 0o644, format.AppendIndex(nil, idx)); err != nil {
		return w.fail(fmt.Errorf("%s: %w", w.opts.Prefix, err))
	}
	if w.opts.OnFileDone != nil {
		if err := w.opts.OnFileDone(format.IndexFile, path); err != nil {
			return w.fail(fmt.Errorf("%s: after writing %s: %w", w.opts.Prefix, format.IndexFile, err))
		}
	}
	return nil
}

func (w *Writer) shutdown() {
	if w.closed {
		return
	}
	w.closed = true
	close(w.queue)
	<-w.done
	if w.zip != nil {
		w.zip.Close()
	}
}

// Close abandons an unfinished Writer: it waits for shard files in flight
// and writes no index.json. After Finish it does nothing.
func (w *Writer) Close() error {
	w.shutdown()
	return w.Err()
}

// Shards returns the index entries committed so far (complete after
// Finish).
func (w *Writer) Shards() []format.ShardInfo {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]format.ShardInfo(nil), w.shards...)
}
