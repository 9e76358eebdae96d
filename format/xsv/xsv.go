// Package xsv reads and writes MosaicML Streaming's delimited-text shard
// formats, CSV ("format": "csv"), TSV ("tsv") and XSV ("xsv", any
// separator), byte-compatibly with mosaicml-streaming's XSVWriter,
// CSVWriter, TSVWriter and their readers (spec section 7.2).
//
// A shard is two files: shard.NNNNN.<fmt> holds a header line (the column
// names joined by the separator, then the newline) and one line per
// sample (each column's text joined by the separator, then the newline;
// there is no quoting or escaping); shard.NNNNN.<fmt>.meta holds
//
//	u32 N | u32 offsets[N+1] (positions in the data file) | config JSON
//
// where offsets[0] is the header's length. Either file may be stored
// compressed (".zstd", ".gz", ...). Columns are "str", "int" or "float",
// stored sorted by name. The Writer's data files, meta files and
// index.json are byte-identical to MosaicML's for the same samples and
// arguments; compressed files decompress to identical bytes.
//
// # Deviations from MosaicML
//
//   - Writers refuse bools in int columns (Python writes "True", which its
//     own reader cannot parse), strings that are not valid UTF-8, and lines
//     a multi-character separator would split differently.
//   - An empty newline is not available: "" selects the default "\n"
//     (Python refuses an empty newline or separator too).
//   - Readers report a line whose field count differs from the columns,
//     or that does not end with the newline, as corrupt (Python silently
//     drops fields or characters).
//
// # Errors
//
// Malformed meta files, offsets and lines yield a *format.CorruptError
// (errors.Is format.ErrCorrupt) naming the file, shard, sample and offset.
//
// # Concurrency
//
// Schema and Shard are safe for concurrent use (Close aside); Writer is
// not.
package xsv

import (
	"errors"
	"fmt"
	"io"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/internal/split"
)

// WriterOptions configures a Writer. Columns is required; every other zero
// value is documented.
type WriterOptions struct {
	// Format is CSV, TSV or XSV. "" means CSV.
	Format string
	// Columns maps column name to encoding: "str", "int" or "float".
	// Required. Names must not contain the separator or the newline.
	Columns map[string]string
	// Separator joins fields. Required for XSV; for CSV and TSV it must be
	// "" or the format's own ("," or "\t").
	Separator string
	// Newline terminates every line. "" means "\n" (MosaicML's default).
	Newline string
	// Compression is "" (none) or family[:level]: br, bz2, gz, snappy,
	// zstd. Data and meta files are compressed separately.
	Compression string
	// Hashes lists hash algorithms for the index, in sorted order.
	Hashes []string
	// SizeLimit bounds a shard's sample bytes (the header line and the
	// meta file do not count, as in MosaicML). It must be below 2^32.
	// Zero or negative means no limit (written as null); pass
	// mds.DefaultSizeLimit (1<<26) for MosaicML's default.
	SizeLimit int64
	// OnFileDone, if set, is called after each file is durably in place:
	// a shard's data file, then its meta file, in shard order, then
	// index.json. It runs on a writer goroutine, one call at a time; an
	// error stops the writer.
	OnFileDone func(basename, localPath string) error
	// ExistOK allows a non-empty output directory (files Sluice writes
	// replace existing ones; nothing else is deleted). Default false.
	ExistOK bool
	// NoEmptyShards fixes MosaicML's quirk of writing a 0-sample shard
	// before an oversized first sample (spec 6.3). Default false: the
	// quirk is reproduced, so datasets are byte-identical to MosaicML's.
	NoEmptyShards bool
	// Parallelism is how many shards are hashed, compressed and written
	// concurrently. Zero means GOMAXPROCS.
	Parallelism int
}

// Writer writes a CSV, TSV or XSV dataset to a local directory: each
// shard's data and meta files as the shard fills, then index.json at
// Finish. Files are written to a temporary name, synced and renamed into
// place, and index.json comes last, so a crash never leaves an index that
// names a missing or partial file.
//
// A Writer is not safe for concurrent use. Errors are sticky, except that
// a sample the schema refuses is reported without stopping the writer.
type Writer struct {
	schema *Schema
	w      *split.Writer
}

// NewWriter validates opts and returns a Writer for the directory dir,
// which is created if needed.
func NewWriter(dir string, opts *WriterOptions) (*Writer, error) {
	if opts == nil || len(opts.Columns) == 0 {
		return nil, errors.New("xsv: writer needs columns")
	}
	schema, err := NewSchema(opts.Format, opts.Columns, opts.Separator, opts.Newline)
	if err != nil {
		return nil, err
	}
	t := format.ShardInfo{Format: schema.format, ColumnNames: schema.names, ColumnEncodings: schema.encs, Newline: schema.newline}
	if schema.format == XSV {
		t.Separator = schema.sep
	}
	w, err := split.NewWriter(dir, split.Options{
		Prefix: "xsv", Template: t, Header: schema.AppendHeader(nil),
		Compression: opts.Compression, Hashes: opts.Hashes, SizeLimit: opts.SizeLimit,
		OnFileDone: opts.OnFileDone, ExistOK: opts.ExistOK, NoEmptyShards: opts.NoEmptyShards,
		Parallelism: opts.Parallelism,
	})
	if err != nil {
		return nil, err
	}
	return &Writer{schema: schema, w: w}, nil
}

// Schema returns the writer's schema.
func (w *Writer) Schema() *Schema { return w.schema }

// Write encodes sample (see Schema.AppendRecord) and appends it to the
// current shard, first flushing the shard if the line would take it past
// the size limit.
func (w *Writer) Write(sample format.Sample) error {
	buf, err := w.w.Buffer()
	if err != nil {
		return err
	}
	buf, err = w.schema.AppendRecord(buf, sample)
	if err != nil {
		return err
	}
	return w.w.Commit(buf)
}

// Finish flushes the last shard, waits for every shard's files and writes
// index.json. A writer that received no sample writes an index with no
// shards.
func (w *Writer) Finish() error { return w.w.Finish() }

// Close abandons an unfinished Writer: it waits for files in flight and
// writes no index.json. After Finish it does nothing.
func (w *Writer) Close() error { return w.w.Close() }

// Shards returns the index entries written so far (complete after Finish).
func (w *Writer) Shards() []format.ShardInfo { return w.w.Shards() }

// Shard is one opened raw (uncompressed) CSV, TSV or XSV shard: its
// validated meta file and the data file. Each sample is found in O(1).
//
// A Shard is safe for concurrent use, except Close.
type Shard struct {
	s      *split.Shard
	schema *Schema
}

var _ format.Shard = (*Shard)(nil)

func newShard(s *split.Shard, err error) (*Shard, error) {
	if err != nil {
		return nil, fmt.Errorf("xsv: %w", err)
	}
	schema, err := schemaOf(s.Info)
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("xsv: %w", s.Corrupt(-1, -1, "bad columns", err))
	}
	return &Shard{s: s, schema: schema}, nil
}

// OpenShard opens a raw shard whose data file of size bytes is read
// through data and whose meta file's bytes are meta (its size is the
// index's raw_meta bytes: 4 per sample plus the config). info is the
// shard's index entry; with nil the columns come from the meta file's
// config. Offsets are validated against size before anything sized by
// them is allocated. Records are read with ReadAt, one allocation each.
func OpenShard(data io.ReaderAt, size int64, meta []byte, info *format.ShardInfo) (*Shard, error) {
	return newShard(split.Open(split.Source{ReaderAt: data, Size: size, Meta: meta}, info, CSV, TSV, XSV))
}

// OpenBytes opens a raw shard held in memory. Records are views of data.
func OpenBytes(data, meta []byte, info *format.ShardInfo) (*Shard, error) {
	if data == nil {
		data = []byte{}
	}
	return newShard(split.Open(split.Source{Data: data, Meta: meta}, info, CSV, TSV, XSV))
}

// OpenFiles maps the raw data and meta files read-only and opens them.
// Records are views of the mapping, valid until Close.
func OpenFiles(dataPath, metaPath string, info *format.ShardInfo) (*Shard, error) {
	return newShard(split.OpenFiles(dataPath, metaPath, info, CSV, TSV, XSV))
}

// SetID sets the shard's position in its index, used in error messages.
func (s *Shard) SetID(k int) { s.s.ID = k }

// Info returns the shard's index entry (or the config from its meta file).
// It must not be modified.
func (s *Shard) Info() *format.ShardInfo { return s.s.Info }

// Schema returns the shard's format, columns, separator and newline.
func (s *Shard) Schema() *Schema { return s.schema }

// Len returns the number of samples.
func (s *Shard) Len() int { return s.s.Len() }

// Size returns the data file's size.
func (s *Shard) Size() int64 { return s.s.Size() }

// Span returns the byte range of sample j's line in the data file.
func (s *Shard) Span(j int) (off, n int64, err error) { return s.s.Span(j) }

// Record returns sample j's line, newline included: a view for OpenBytes
// and OpenFiles shards (valid until Close, must not be modified), a fresh
// slice for OpenShard.
func (s *Shard) Record(j int) ([]byte, error) { return s.s.Record(j) }

// Sample decodes sample j (see Schema.Decode).
func (s *Shard) Sample(j int) (format.Sample, error) {
	out := make(format.Sample, len(s.schema.names))
	if err := s.DecodeInto(j, out); err != nil {
		return nil, err
	}
	return out, nil
}

// DecodeInto decodes sample j into out. Decoded values never alias the
// shard.
func (s *Shard) DecodeInto(j int, out format.Sample) error {
	rec, err := s.s.Record(j)
	if err != nil {
		return err
	}
	if err := s.schema.DecodeInto(rec, out); err != nil {
		off, _, _ := s.s.Span(j)
		var ce *format.CorruptError
		if errors.As(err, &ce) {
			return s.s.Corrupt(j, off, ce.Reason, ce.Err)
		}
		return s.s.Corrupt(j, off, "", err)
	}
	return nil
}

// Close releases the shard's mappings. Views from Record become invalid.
func (s *Shard) Close() error { return s.s.Close() }

// OpenDir opens the shard that info (an index entry) describes in the
// dataset directory dir: its raw files, mapped, when present with the
// sizes the index gives, else its compressed files, decompressed into
// memory (never beyond the raw sizes the index declares).
func OpenDir(dir string, info *format.ShardInfo) (*Shard, error) {
	return newShard(split.OpenDir(dir, info, CSV, TSV, XSV))
}

// VerifyShard checks shard k of the dataset in dir, described by info
// (an index entry): each stored file exists with the size and every
// digest the index records; compressed files decompress to the raw sizes
// and raw digests; the meta file's offsets fit the data file and its
// config matches the index; and every sample decodes. It returns the
// number of files and bytes it read and the first problem found (a
// *format.CorruptError naming file, shard and sample where the data is at
// fault), nil if the shard is sound.
func VerifyShard(dir string, k int, info *format.ShardInfo) (files int, bytes int64, err error) {
	var schema *Schema
	out := format.Sample{}
	return split.VerifyShard(dir, k, info, func(s *split.Shard, j int) error {
		if schema == nil {
			sh, err := newShard(s, nil)
			if err != nil {
				return err
			}
			schema = sh.schema
		}
		sh := &Shard{s: s, schema: schema}
		clear(out)
		return sh.DecodeInto(j, out)
	}, CSV, TSV, XSV)
}
