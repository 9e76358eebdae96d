package wds

import (
	"bytes"
	"fmt"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/internal/mmap"
)

// Format is the shard format name of WebDataset tars in an index.json.
const Format = "wds"

// KeyField is the name under which File.Sample returns the sample key, as
// WebDataset's __key__.
const KeyField = "__key__"

// URLField is the name under which the streaming engine adds a tar
// sample's shard URL, as WebDataset's __url__ (File.Sample, which knows no
// URL, leaves it out).
const URLField = "__url__"

// File is one tar shard on local disk, mapped into memory: the
// format.Shard the streaming engine reads. Record returns the raw tar bytes
// of one sample (its headers and data, a valid tar stream by itself). It is
// safe for concurrent use, except Close.
type File struct {
	m    *mmap.File
	sh   *Shard
	name string
}

// OpenFile maps the tar at path and indexes its samples. With info (the
// shard's index entry) the file's size and sample count must match it; a
// mismatch, like any malformed archive, is an error matching ErrCorrupt and
// format.ErrCorrupt. opts may be nil.
func OpenFile(path string, info *format.ShardInfo, opts *ReaderOptions) (*File, error) {
	return OpenFileIndexed(path, info, opts, nil)
}

// FileIndex is the scanned sample layout of a File, to open the same
// bytes again without scanning (see OpenFileIndexed). It holds no file.
type FileIndex struct {
	size    int64
	samples []sampleSpan
}

// Index returns the file's sample layout.
func (f *File) Index() *FileIndex { return &FileIndex{size: f.m.Len(), samples: f.sh.samples} }

// OpenFileIndexed is OpenFile reusing idx, the Index of an earlier File
// of the same bytes, instead of scanning the headers again. The caller
// vouches that the file is unchanged (same path, size and modification
// time); the size and sample count are checked again. A nil idx scans.
func OpenFileIndexed(path string, info *format.ShardInfo, opts *ReaderOptions, idx *FileIndex) (*File, error) {
	m, err := mmap.Open(path)
	if err != nil {
		return nil, fmt.Errorf("wds: open shard: %w", err)
	}
	name := path
	if info != nil {
		name = info.RawData.Basename
		if m.Len() != info.RawData.Bytes {
			m.Close()
			return nil, &CorruptError{Shard: name, Offset: -1,
				Reason: fmt.Sprintf("file has %d bytes, the index says %d", m.Len(), info.RawData.Bytes)}
		}
	}
	var sh *Shard
	if idx != nil && idx.size == m.Len() {
		sh = &Shard{r: bytes.NewReader(m.Bytes()), size: m.Len(), samples: idx.samples}
	} else if sh, err = OpenShardBytes(m.Bytes(), opts); err != nil {
		m.Close()
		return nil, withShard(err, name)
	}
	if info != nil && sh.Len() != info.Samples {
		m.Close()
		return nil, &CorruptError{Shard: name, Offset: -1,
			Reason: fmt.Sprintf("archive has %d samples, the index says %d", sh.Len(), info.Samples)}
	}
	return &File{m: m, sh: sh, name: name}, nil
}

// Len returns the number of samples.
func (f *File) Len() int { return f.sh.Len() }

// Span returns the byte range of sample j's members (headers included).
func (f *File) Span(j int) (off, n int64, err error) { return f.sh.Span(j) }

// Record returns sample j's tar bytes, a view into the map valid until
// Close.
func (f *File) Record(j int) ([]byte, error) {
	off, n, err := f.sh.Span(j)
	if err != nil {
		return nil, err
	}
	return f.m.Bytes()[off : off+n], nil
}

// Key returns sample j's key.
func (f *File) Key(j int) (string, error) { return f.sh.Key(j) }

// Fields returns where sample j's fields lie in the file, in archive order.
func (f *File) Fields(j int) ([]FieldSpan, error) { return f.sh.Fields(j) }

// Bytes returns the whole mapped file, valid until Close.
func (f *File) Bytes() []byte { return f.m.Bytes() }

// Sample returns sample j as WebDataset yields it before decoding: the
// key under KeyField (a string) and each field's bytes (copies) under its
// field name.
func (f *File) Sample(j int) (format.Sample, error) {
	key, err := f.sh.Key(j)
	if err != nil {
		return nil, err
	}
	spans, _ := f.sh.Fields(j)
	data := f.m.Bytes()
	out := make(format.Sample, len(spans)+1)
	out[KeyField] = key
	for _, sp := range spans {
		out[sp.Name] = bytes.Clone(data[sp.Offset : sp.Offset+sp.Size])
	}
	return out, nil
}

// AppendDump appends sample j's canonical dump line (see the package
// function AppendDump); url is the shard's URL or name for "url".
func (f *File) AppendDump(dst []byte, j int, url string) ([]byte, error) {
	key, err := f.sh.Key(j)
	if err != nil {
		return dst, err
	}
	spans, _ := f.sh.Fields(j)
	data := f.m.Bytes()
	names := make([]string, len(spans))
	vals := make([][]byte, len(spans))
	for i, sp := range spans {
		names[i], vals[i] = sp.Name, data[sp.Offset:sp.Offset+sp.Size]
	}
	return AppendDump(dst, key, url, names, vals)
}

// Close unmaps the file.
func (f *File) Close() error { return f.m.Close() }

// withShard names the shard in a CorruptError err carries.
func withShard(err error, shard string) error {
	if ce, ok := err.(*CorruptError); ok && ce.Shard == "" {
		ce.Shard = shard
		return ce
	}
	return fmt.Errorf("wds: %s: %w", shard, err)
}
