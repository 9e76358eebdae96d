package split

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/compress"
	"github.com/sluicedata/sluice/internal/mmap"
)

// Shard is an opened raw split shard: a validated meta file and the data
// file it indexes, held in memory, mapped, or read through an
// io.ReaderAt. It is safe for concurrent use, except Close.
type Shard struct {
	// Info is the shard's index entry (or the config parsed from its meta
	// file when opened without one).
	Info *format.ShardInfo
	// ID is the shard's position in its index for error messages, -1 if
	// not known.
	ID int

	dataFile string
	metaFile string
	data     []byte      // whole data file when in memory or mapped
	ra       io.ReaderAt // otherwise
	size     int64
	meta     Meta
	closers  []io.Closer
}

// Source is what Open reads: the data file (Bytes, or ReaderAt with Size)
// and the meta file's bytes, with their names for error messages.
type Source struct {
	// DataFile names the data file in errors.
	DataFile string
	// Data is the whole data file; used when ReaderAt is nil.
	Data []byte
	// ReaderAt reads a data file of Size bytes; records are then copied.
	ReaderAt io.ReaderAt
	// Size is the data file's size when ReaderAt is set.
	Size int64
	// MetaFile names the meta file in errors.
	MetaFile string
	// Meta is the whole meta file.
	Meta []byte
	// Closers are closed by Shard.Close (for example memory maps).
	Closers []io.Closer
}

// Open validates src against info (the index entry; nil: use the meta
// file's own config) and returns the shard. formats lists the accepted
// values of the entry's format. Nothing sized by the input is allocated
// before it is checked. On error, src's Closers are closed.
func Open(src Source, info *format.ShardInfo, formats ...string) (s *Shard, err error) {
	defer func() {
		if err != nil {
			for _, c := range src.Closers {
				c.Close()
			}
		}
	}()
	s = &Shard{ID: -1, dataFile: src.DataFile, metaFile: src.MetaFile, data: src.Data, ra: src.ReaderAt, size: src.Size, closers: src.Closers}
	if src.ReaderAt == nil {
		s.size = int64(len(src.Data))
	}
	if info != nil {
		if s.dataFile == "" {
			s.dataFile = info.RawData.Basename
		}
		if s.metaFile == "" && info.RawMeta != nil {
			s.metaFile = info.RawMeta.Basename
		}
		if err := CheckInfo(info, formats...); err != nil {
			return nil, s.corrupt(-1, -1, "%v", err)
		}
		if info.RawData.Bytes != s.size {
			return nil, s.corrupt(-1, -1, "data file has %d bytes, index says %d", s.size, info.RawData.Bytes)
		}
		if info.RawMeta.Bytes != int64(len(src.Meta)) {
			ce := s.corrupt(-1, -1, "meta file has %d bytes, index says %d", len(src.Meta), info.RawMeta.Bytes)
			ce.File = s.metaFile
			return nil, ce
		}
	}
	if s.size > MaxDataBytes {
		return nil, s.corrupt(-1, -1, "data file of %d bytes exceeds the 4 GiB limit of u32 offsets", s.size)
	}
	if s.meta, err = ParseMeta(s.metaFile, src.Meta, s.size); err != nil {
		return nil, s.withID(err)
	}
	if info == nil {
		if info, err = ParseConfig(s.meta.Config); err != nil {
			ce := format.Corruptf(s.metaFile, "bad config")
			ce.Offset, ce.Err = int64(4+4*(s.meta.N+1)), err
			return nil, ce
		}
		if err := CheckInfo(info, formats...); err != nil {
			ce := format.Corruptf(s.metaFile, "%v", err)
			return nil, ce
		}
		info.Samples = s.meta.N
		info.RawData = format.FileInfo{Basename: s.dataFile, Bytes: s.size}
		info.RawMeta = &format.FileInfo{Basename: s.metaFile, Bytes: int64(len(src.Meta))}
	} else if info.Samples != s.meta.N {
		ce := format.Corruptf(s.metaFile, "meta file holds %d samples, index says %d", s.meta.N, info.Samples)
		ce.Offset = 0
		return nil, ce
	}
	s.Info = info
	return s, nil
}

// OpenFiles maps the data and meta files at dataPath and metaPath
// read-only and opens them (see Open). Records are views of the mapping,
// valid until Close.
func OpenFiles(dataPath, metaPath string, info *format.ShardInfo, formats ...string) (*Shard, error) {
	dm, err := mmap.Open(dataPath)
	if err != nil {
		return nil, err
	}
	mm, err := mmap.Open(metaPath)
	if err != nil {
		dm.Close()
		return nil, err
	}
	src := Source{DataFile: dataPath, Data: dm.Bytes(), MetaFile: metaPath, Meta: mm.Bytes(), Closers: []io.Closer{dm, mm}}
	if dm.Bytes() == nil { // empty file
		src.Data = []byte{}
	}
	if info != nil {
		src.DataFile, src.MetaFile = info.RawData.Basename, ""
		if info.RawMeta != nil {
			src.MetaFile = info.RawMeta.Basename
		}
	}
	return Open(src, info, formats...)
}

// ReadFile reads a file of at most maxBytes bytes (for a meta file, the index's
// raw_meta size, or a bound of the caller's choosing).
func ReadFile(path string, maxBytes int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() > maxBytes {
		return nil, fmt.Errorf("%s: meta file of %d bytes exceeds %d", path, fi.Size(), maxBytes)
	}
	b := make([]byte, fi.Size())
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return b, nil
}

func (s *Shard) corrupt(sample int, off int64, f string, args ...any) *format.CorruptError {
	return &format.CorruptError{File: s.dataFile, Shard: s.ID, Sample: sample, Offset: off, Reason: fmt.Sprintf(f, args...)}
}

func (s *Shard) withID(err error) error {
	var ce *format.CorruptError
	if errors.As(err, &ce) && ce.Shard < 0 {
		ce.Shard = s.ID
	}
	return err
}

// Corrupt returns a *format.CorruptError about the data file at sample j
// and offset off (-1: not known).
func (s *Shard) Corrupt(j int, off int64, reason string, err error) *format.CorruptError {
	return &format.CorruptError{File: s.dataFile, Shard: s.ID, Sample: j, Offset: off, Reason: reason, Err: err}
}

// DataFile returns the data file's name as errors give it.
func (s *Shard) DataFile() string { return s.dataFile }

// Len returns the number of samples.
func (s *Shard) Len() int { return s.meta.N }

// Size returns the data file's size.
func (s *Shard) Size() int64 { return s.size }

// Meta returns the parsed meta file.
func (s *Shard) Meta() *Meta { return &s.meta }

// Span returns the byte range of sample j's record in the data file.
func (s *Shard) Span(j int) (off, n int64, err error) {
	if j < 0 || j >= s.meta.N {
		return 0, 0, fmt.Errorf("%s: sample %d out of range [0, %d)", s.dataFile, j, s.meta.N)
	}
	off, n = s.meta.Span(j)
	return off, n, nil
}

// Record returns sample j's record: a view of the data for in-memory and
// mapped shards (valid until Close, must not be modified), a fresh slice
// for ReaderAt shards.
func (s *Shard) Record(j int) ([]byte, error) {
	off, n, err := s.Span(j)
	if err != nil {
		return nil, err
	}
	if s.ra == nil {
		return s.data[off : off+n : off+n], nil
	}
	b := make([]byte, n) // n ≤ size, checked by ParseMeta
	if _, err := s.ra.ReadAt(b, off); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, s.corrupt(j, off, "data file shorter than its declared %d bytes", s.size)
		}
		return nil, fmt.Errorf("read %s at %d: %w", s.dataFile, off, err)
	}
	return b, nil
}

// Close releases the shard's resources. Views from Record become invalid.
func (s *Shard) Close() error {
	var errs []error
	for _, c := range s.closers {
		errs = append(errs, c.Close())
	}
	s.closers = nil
	return errors.Join(errs...)
}

// OpenDir opens the shard that info describes in the dataset directory
// dir: the raw files when present with the sizes the index gives, else
// the compressed forms, decompressed into memory (never beyond the raw
// sizes the index declares).
func OpenDir(dir string, info *format.ShardInfo, formats ...string) (*Shard, error) {
	if err := CheckInfo(info, formats...); err != nil {
		return nil, format.Corruptf(info.RawData.Basename, "%v", err)
	}
	load := func(raw format.FileInfo, zip *format.FileInfo) ([]byte, string, bool, error) {
		rawPath := filepath.Join(dir, filepath.FromSlash(raw.Basename))
		if fi, err := os.Stat(rawPath); err == nil && fi.Size() == raw.Bytes || zip == nil {
			return nil, rawPath, true, nil
		}
		zipPath := filepath.Join(dir, filepath.FromSlash(zip.Basename))
		zb, err := ReadFile(zipPath, zip.Bytes)
		if err != nil {
			return nil, "", false, err
		}
		if int64(len(zb)) != zip.Bytes {
			return nil, "", false, format.Corruptf(zip.Basename, "file has %d bytes, index says %d", len(zb), zip.Bytes)
		}
		b, err := compress.Decompress(info.Family(), zb, raw.Bytes)
		if err != nil {
			ce := format.Corruptf(zip.Basename, "decompress")
			ce.Err = err
			return nil, "", false, ce
		}
		return b, "", false, nil
	}
	data, dataPath, dataRaw, err := load(info.RawData, info.ZipData)
	if err != nil {
		return nil, err
	}
	meta, metaPath, metaRaw, err := load(*info.RawMeta, info.ZipMeta)
	if err != nil {
		return nil, err
	}
	src := Source{DataFile: info.RawData.Basename, Data: data, MetaFile: info.RawMeta.Basename, Meta: meta}
	if dataRaw {
		m, err := mmap.Open(dataPath)
		if err != nil {
			return nil, err
		}
		src.Closers = append(src.Closers, m)
		src.Data = m.Bytes()
	}
	if src.Data == nil {
		src.Data = []byte{}
	}
	if metaRaw {
		if src.Meta, err = ReadFile(metaPath, info.RawMeta.Bytes); err != nil {
			for _, c := range src.Closers {
				c.Close()
			}
			return nil, err
		}
	}
	return Open(src, info, formats...)
}
