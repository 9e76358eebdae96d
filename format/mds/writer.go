package mds

import (
	"encoding/binary"
	"errors"
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

// DefaultSizeLimit is MosaicML's default shard size limit (64 MiB).
const DefaultSizeLimit = 1 << 26

// WriterOptions configures a Writer. Columns is required; every other zero
// value is documented.
type WriterOptions struct {
	// Columns maps column name to MDS encoding ("int", "str",
	// "ndarray:float32", ...). Required.
	Columns map[string]string
	// Compression is "" (none) or family[:level]: br, bz2, gz, snappy, zstd.
	Compression string
	// Hashes lists hash algorithms for the index, in sorted order, as
	// MosaicML requires (see hashing.Names).
	Hashes []string
	// SizeLimit is the shard size limit in bytes, which must be below
	// 2^32. Zero or negative means no limit (written as null), as a falsy
	// size_limit does in MosaicML; pass DefaultSizeLimit for MosaicML's
	// default.
	SizeLimit int64
	// OnFileDone, if set, is called after each file is durably in place:
	// for each shard file in shard order, then for index.json. basename is
	// the name relative to the dataset, localPath the file on disk. It runs
	// on a writer goroutine, one call at a time; an error stops the writer
	// (it is returned by the next Write or by Finish).
	OnFileDone func(basename, localPath string) error
	// ExistOK allows a non-empty output directory. Files Sluice writes
	// replace existing ones; nothing else is deleted (MosaicML's exist_ok
	// removes the directory first). Default false: a non-empty directory
	// is an error.
	ExistOK bool
	// NoEmptyShards fixes MosaicML's quirk (spec 6.3) of writing a
	// 0-sample shard before an oversized first sample. Default false:
	// reproduce it, so that datasets are byte-identical to MosaicML's.
	NoEmptyShards bool
	// Parallelism is how many shards are hashed, compressed and written
	// concurrently. Zero means GOMAXPROCS.
	Parallelism int
}

// Writer writes an MDS dataset to a local directory: shard files as they
// fill, then index.json at Finish. Every file is written to a temporary
// name, synced and renamed into place, and index.json comes last, so a
// crash never leaves an index that names a missing or partial shard.
//
// Shards are hashed, compressed and written by background goroutines
// (Parallelism at a time) while Write keeps encoding.
//
// A Writer is not safe for concurrent use. Errors are sticky: after the
// first failure every call returns it.
type Writer struct {
	dir      string
	opts     WriterOptions
	names    []string
	encs     []*Encoding
	nvar     int
	cfg      []byte
	template format.ShardInfo
	limit    int64
	zip      *compress.Compressor

	body    []byte  // reserve bytes of room for the header, then the records
	reserve int     // header room at the front of body
	ends    []int64 // end of each record, relative to body[reserve:]
	shardNo int

	sem     chan struct{}
	queue   chan *job
	done    chan struct{}
	free    chan []byte // record buffers returned by finished jobs
	nbufs   int         // record buffers allocated so far (at most maxBufs)
	maxBufs int
	failed  atomic.Bool // set once err is set, for a lock-free check
	mu      sync.Mutex
	err     error              // sticky; guarded by mu
	shards  []format.ShardInfo // guarded by mu
	closed  bool
}

type job struct {
	info format.ShardInfo
	raw  []byte // the whole raw shard file
	buf  []byte // the buffer to recycle afterwards
	path string
	name string
	err  error
	done chan struct{}
}

// NewWriter validates opts and returns a Writer for the directory dir,
// which is created if needed.
func NewWriter(dir string, opts *WriterOptions) (*Writer, error) {
	if opts == nil || len(opts.Columns) == 0 {
		return nil, errors.New("mds: writer needs columns")
	}
	w := &Writer{dir: dir, opts: *opts}
	for name := range opts.Columns {
		if name == "" {
			return nil, errors.New("mds: empty column name")
		}
		w.names = append(w.names, name)
	}
	sort.Strings(w.names)
	t := &w.template
	t.Format, t.Version = "mds", 2
	for _, name := range w.names {
		e, err := ParseEncoding(opts.Columns[name])
		if err != nil {
			return nil, fmt.Errorf("mds: column %q: %w", name, err)
		}
		w.encs = append(w.encs, e)
		if e.Size() == 0 {
			w.nvar++
		}
		t.ColumnNames = append(t.ColumnNames, name)
		t.ColumnEncodings = append(t.ColumnEncodings, e.String())
		t.ColumnSizes = append(t.ColumnSizes, e.Size())
	}
	if _, err := compress.Parse(opts.Compression); err != nil {
		return nil, fmt.Errorf("mds: %w", err)
	}
	t.Compression = opts.Compression
	if opts.Compression != "" {
		z, err := compress.NewCompressor(opts.Compression)
		if err != nil {
			return nil, fmt.Errorf("mds: %w", err)
		}
		w.zip = z
	}
	if !sort.StringsAreSorted(opts.Hashes) {
		return nil, errors.New("mds: hashes must be unique and in sorted order")
	}
	for _, h := range opts.Hashes {
		if !hashing.Valid(h) {
			return nil, fmt.Errorf("mds: unknown hash algorithm %q", h)
		}
	}
	// Kept as given, like MosaicML (a duplicate yields one digest).
	t.Hashes = append([]string{}, opts.Hashes...)
	if opts.SizeLimit >= 1<<32 {
		return nil, fmt.Errorf("mds: size limit %d must be below 2^32", opts.SizeLimit)
	}
	if opts.SizeLimit > 0 {
		w.limit = opts.SizeLimit
		t.SizeLimit = opts.SizeLimit
	}
	w.cfg = format.AppendConfig(nil, t)
	w.reserve = int(w.headerSize()) + 4*256
	w.body = make([]byte, w.reserve, w.reserve+64<<10)

	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("mds: %w", err)
	}
	if !opts.ExistOK {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return nil, fmt.Errorf("mds: %w", err)
		}
		if len(ents) > 0 {
			return nil, fmt.Errorf("mds: output directory %s is not empty", dir)
		}
	}
	par := opts.Parallelism
	if par <= 0 {
		par = runtime.GOMAXPROCS(0)
	}
	w.sem = make(chan struct{}, par)
	w.queue = make(chan *job, par)
	// One buffer fills while up to par are hashed, compressed and
	// written; reusing them keeps memory bounded and pages warm.
	w.maxBufs = par + 1
	w.free = make(chan []byte, w.maxBufs)
	w.nbufs = 1
	w.done = make(chan struct{})
	go w.commit()
	return w, nil
}

// headerSize is the size of an empty shard: N, offsets[0] and the config.
func (w *Writer) headerSize() int64 { return 8 + int64(len(w.cfg)) }

// shardSize is the exact file size of the current shard.
func (w *Writer) shardSize() int64 {
	return w.headerSize() + int64(len(w.body)-w.reserve) + 4*int64(len(w.ends))
}

func (w *Writer) sticky() error {
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

// Write encodes sample and appends it to the current shard, first flushing
// the shard if the sample would take it past the size limit. Every column
// must be present; other keys are ignored.
func (w *Writer) Write(sample format.Sample) error {
	if err := w.sticky(); err != nil {
		return err
	}
	if w.closed {
		return errors.New("mds: write after Finish")
	}
	start := len(w.body)
	body, err := w.appendRecord(w.body, sample)
	if err != nil {
		w.body = w.body[:start]
		return err // a bad sample is the caller's error, not sticky
	}
	w.body = body
	return w.place(start)
}

// Columns returns the column names in record order (sorted, as MosaicML
// orders them) and their encodings, for callers of WriteRecord. The
// slices are the Writer's own: do not modify them.
func (w *Writer) Columns() ([]string, []*Encoding) { return w.names, w.encs }

// WriteRecord appends one sample record already encoded as spec 3.2
// lays it out: a uint32 length for each variable-size column, then every
// column's encoded value in Columns order. It writes exactly what Write
// writes for the same sample, without a format.Sample in between. The
// record's layout is checked (lengths add up, fixed-size columns have
// their size); the values themselves are not decoded. rec is copied.
func (w *Writer) WriteRecord(rec []byte) error {
	if err := w.sticky(); err != nil {
		return err
	}
	if w.closed {
		return errors.New("mds: write after Finish")
	}
	if err := w.checkRecord(rec); err != nil {
		return err
	}
	start := len(w.body)
	w.body = append(w.body, rec...)
	return w.place(start)
}

// WriteFields appends one sample given as each column's encoded value,
// in Columns order: the record is the variable-size lengths followed by
// the fields, the same bytes Write writes for the same sample, built with
// one copy of each field. Fixed-size columns must have their size.
func (w *Writer) WriteFields(fields [][]byte) error {
	if err := w.sticky(); err != nil {
		return err
	}
	if w.closed {
		return errors.New("mds: write after Finish")
	}
	if len(fields) != len(w.encs) {
		return fmt.Errorf("mds: %d fields for %d columns", len(fields), len(w.encs))
	}
	for i, e := range w.encs {
		if size := e.Size(); size > 0 && len(fields[i]) != size {
			return fmt.Errorf("mds: column %q: %s value encodes to %d bytes, want %d", w.names[i], e, len(fields[i]), size)
		}
		if int64(len(fields[i])) > MaxShardBytes {
			return fmt.Errorf("mds: column %q value of %d bytes is too large", w.names[i], len(fields[i]))
		}
	}
	start := len(w.body)
	for range w.nvar {
		w.body = append(w.body, 0, 0, 0, 0)
	}
	v := 0
	for i, f := range fields {
		if w.encs[i].Size() == 0 {
			binary.LittleEndian.PutUint32(w.body[start+4*v:], uint32(len(f)))
			v++
		}
		w.body = append(w.body, f...)
	}
	return w.place(start)
}

// checkRecord verifies that rec's variable-size lengths and the fixed
// sizes add up to its length.
func (w *Writer) checkRecord(rec []byte) error {
	hdr := 4 * w.nvar
	if len(rec) < hdr {
		return fmt.Errorf("mds: record of %d bytes is shorter than its %d-byte header", len(rec), hdr)
	}
	total := uint64(hdr)
	v := 0
	for _, e := range w.encs {
		if e.Size() > 0 {
			total += uint64(e.Size())
			continue
		}
		total += uint64(binary.LittleEndian.Uint32(rec[4*v:]))
		v++
	}
	if total != uint64(len(rec)) {
		return fmt.Errorf("mds: record of %d bytes does not match its layout (%d bytes)", len(rec), total)
	}
	return nil
}

// place finishes appending the record at w.body[start:]: it flushes the
// shard first when the record would take it past the size limit.
func (w *Writer) place(start int) error {
	n := int64(len(w.body) - start)
	if w.headerSize()+n+4 > MaxShardBytes {
		w.body = w.body[:start]
		return fmt.Errorf("mds: sample of %d bytes cannot fit in a shard (4 GiB offsets)", n)
	}
	before := w.shardSize() - n // size without the new record
	overLimit := w.limit > 0 && before+n+4 > w.limit
	overMax := before+n+4 > MaxShardBytes // no limit: split rather than wrap offsets
	if overLimit || overMax {
		if len(w.ends) > 0 || !w.opts.NoEmptyShards {
			rec := append([]byte(nil), w.body[start:]...)
			w.body = w.body[:start]
			if err := w.flush(); err != nil {
				return err
			}
			w.body = append(w.body, rec...)
		}
	}
	w.ends = append(w.ends, int64(len(w.body)-w.reserve))
	return nil
}

// appendRecord encodes one sample record (spec 3.2) onto dst.
func (w *Writer) appendRecord(dst []byte, sample format.Sample) ([]byte, error) {
	start := len(dst)
	for range w.nvar {
		dst = append(dst, 0, 0, 0, 0)
	}
	v := 0
	for i, name := range w.names {
		val, ok := sample[name]
		if !ok {
			return dst, fmt.Errorf("mds: sample has no column %q", name)
		}
		before := len(dst)
		var err error
		if dst, err = w.encs[i].Append(dst, val); err != nil {
			return dst, fmt.Errorf("mds: column %q: %w", name, err)
		}
		if w.encs[i].Size() == 0 {
			n := len(dst) - before
			if int64(n) > MaxShardBytes {
				return dst, fmt.Errorf("mds: column %q value of %d bytes is too large", name, n)
			}
			binary.LittleEndian.PutUint32(dst[start+4*v:], uint32(n))
			v++
		}
	}
	return dst, nil
}

// flush hands the current shard to the background pipeline. The header
// is written into the room reserved at the front of the record buffer, so
// the raw file is one contiguous slice without a copy (when the reserve
// was too small, the file is assembled in a new buffer and the reserve
// grows for the next shard). The buffer goes with the job; a recycled one
// takes its place.
func (w *Writer) flush() error {
	n := len(w.ends)
	size := w.shardSize()
	hlen := int(w.headerSize()) + 4*n
	records := w.body[w.reserve:]
	var raw []byte
	if hlen <= w.reserve {
		raw = w.body[w.reserve-hlen:]
	} else {
		raw = make([]byte, hlen+len(records))
		copy(raw[hlen:], records)
	}
	le := binary.LittleEndian
	le.PutUint32(raw, uint32(n))
	base := uint32(hlen)
	le.PutUint32(raw[4:], base)
	for i, e := range w.ends {
		le.PutUint32(raw[8+4*i:], base+uint32(e))
	}
	copy(raw[8+4*n:], w.cfg)
	j := &job{info: w.template, raw: raw, buf: w.body, done: make(chan struct{})}

	w.reserve = max(w.reserve, hlen+hlen/4)
	var next []byte
	select {
	case next = <-w.free:
	default:
		if w.nbufs < w.maxBufs {
			w.nbufs++
		} else {
			next = <-w.free // every buffer is in flight: wait for one
		}
	}
	if cap(next) < w.reserve+len(records) {
		next = make([]byte, 0, max(cap(j.buf), w.reserve+len(records)))
	}
	w.body = next[:w.reserve]
	w.ends = w.ends[:0]

	j.info.Samples = n
	j.info.RawData = format.FileInfo{Basename: fmt.Sprintf("shard.%05d.mds", w.shardNo), Bytes: size}
	w.shardNo++
	w.sem <- struct{}{}
	go func() {
		defer func() { <-w.sem; close(j.done) }()
		j.err = w.process(j)
		w.free <- j.buf[:0] // never blocks: at most maxBufs buffers exist
		j.raw, j.buf = nil, nil
	}()
	w.queue <- j
	return w.sticky()
}

// process hashes, compresses and writes one shard file.
func (w *Writer) process(j *job) error {
	var err error
	if j.info.RawData.Hashes, err = hashing.SumAll(w.template.Hashes, j.raw); err != nil {
		return err
	}
	j.name = j.info.RawData.Basename
	data := j.raw
	if w.zip != nil {
		zdata, err := w.zip.Compress(make([]byte, 0, compress.Bound(len(j.raw))), j.raw)
		if err != nil {
			return fmt.Errorf("mds: compress %s: %w", j.name, err)
		}
		data = zdata
		j.name = j.info.RawData.Basename + "." + w.zip.Spec().Family
		j.info.ZipData = &format.FileInfo{Basename: j.name, Bytes: int64(len(zdata))}
		if j.info.ZipData.Hashes, err = hashing.SumAll(w.template.Hashes, zdata); err != nil {
			return err
		}
	}
	j.path = filepath.Join(w.dir, j.name)
	if err := atomicfile.WriteFile(j.path, 0o644, data); err != nil {
		return fmt.Errorf("mds: %w", err)
	}
	return nil
}

// commit receives finished jobs in shard order.
func (w *Writer) commit() {
	defer close(w.done)
	for j := range w.queue {
		<-j.done
		if w.sticky() != nil {
			continue
		}
		if j.err != nil {
			w.fail(j.err)
			continue
		}
		if w.opts.OnFileDone != nil {
			if err := w.opts.OnFileDone(j.name, j.path); err != nil {
				w.fail(fmt.Errorf("mds: after writing %s: %w", j.name, err))
				continue
			}
		}
		w.mu.Lock()
		w.shards = append(w.shards, j.info)
		w.mu.Unlock()
	}
}

// Finish flushes the last shard, waits for every shard file, then writes
// index.json (and calls OnFileDone for it). A writer that received no
// sample writes an index with no shards.
func (w *Writer) Finish() error {
	if w.closed {
		return w.sticky()
	}
	if err := w.sticky(); err == nil && len(w.ends) > 0 {
		w.flush()
	}
	w.shutdown()
	if err := w.sticky(); err != nil {
		return err
	}
	idx := &format.Index{Shards: w.shards}
	if idx.Shards == nil {
		idx.Shards = []format.ShardInfo{}
	}
	path := filepath.Join(w.dir, format.IndexFile)
	if err := atomicfile.WriteFile(path, 0o644, format.AppendIndex(nil, idx)); err != nil {
		return w.fail(fmt.Errorf("mds: %w", err))
	}
	if w.opts.OnFileDone != nil {
		if err := w.opts.OnFileDone(format.IndexFile, path); err != nil {
			return w.fail(fmt.Errorf("mds: after writing %s: %w", format.IndexFile, err))
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
// and writes no index.json (files already written stay). After Finish it
// does nothing.
func (w *Writer) Close() error {
	w.shutdown()
	if err := w.sticky(); err != nil {
		return err
	}
	return nil
}

// Shards returns the index entries written so far (complete after Finish).
func (w *Writer) Shards() []format.ShardInfo {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]format.ShardInfo(nil), w.shards...)
}
