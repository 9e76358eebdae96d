package wds

import (
	"archive/tar"
	"errors"
	"fmt"
	"hash"
	"io"
	"strings"
)

// ReaderOptions tunes a Reader. A nil *ReaderOptions means the defaults.
type ReaderOptions struct {
	// MaxMemberSize caps the bytes of one member; zero means
	// DefaultMaxMemberSize.
	MaxMemberSize int64
	// MaxSampleSize caps the bytes of one sample, all fields together; zero
	// means DefaultMaxSampleSize.
	MaxSampleSize int64
	// MaxFields caps the fields of one sample; zero means DefaultMaxFields.
	MaxFields int
}

func (o *ReaderOptions) withDefaults() ReaderOptions {
	var r ReaderOptions
	if o != nil {
		r = *o
	}
	if r.MaxMemberSize <= 0 {
		r.MaxMemberSize = DefaultMaxMemberSize
	}
	if r.MaxSampleSize <= 0 {
		r.MaxSampleSize = DefaultMaxSampleSize
	}
	if r.MaxFields <= 0 {
		r.MaxFields = DefaultMaxFields
	}
	return r
}

// FieldSpan locates one field's bytes in the archive.
type FieldSpan struct {
	// Name is the field name ("jpg").
	Name string
	// Offset is the position of the member's data in the archive.
	Offset int64
	// Size is the member's length in bytes.
	Size int64
}

// member is one regular-file entry that belongs to a sample.
type member struct {
	name, key, field string
	nameb            []byte // the name, when name is not set (the stream scanner's members)
	hdrOff, dataOff  int64
	data             []byte
	size             int64
}

// fullName returns the member's name.
func (m *member) fullName() string {
	if m.name == "" && m.nameb != nil {
		return string(m.nameb)
	}
	return m.name
}

// Reader reads samples from a WebDataset archive sequentially. It is not
// safe for concurrent use. Errors are sticky: after the first failure Next
// returns false and Err reports it.
type Reader struct {
	opts     ReaderOptions
	cr       countingReader
	tr       *tar.Reader
	skip     bool          // index only: do not keep member data
	mem      []byte        // the whole archive, for the fast header scanner (nil: archive/tar)
	rs       io.ReadSeeker // a seekable stream for the fast header scanner (nil: archive/tar)
	h        hash.Hash     // what rs's scan reads is written here
	ip       inPlace       // rs's in-place reads, when it has them
	ahead    []byte        // the next header block, read in place with a member's tail
	aheadErr error         // or why there is none
	blk      [512]byte
	pending  *member
	mbuf     [2]member // the stream scanner's members, used in turn
	mi       int
	nameBuf  []byte      // the stream scanner's USTAR prefix + "/" + name
	fields   []fieldName // the stream scanner's last few field names
	nf       int
	sample   Sample
	spans    []FieldSpan
	start    int64  // byte offset of the current sample's first header
	end      int64  // byte offset just past the current sample's last member (padded)
	next     int64  // byte offset where the header of the member after the last one read starts
	last     string // name of the last member archive/tar read, for errors
	lastHdr  int64  // and the offset of its header
	err      error
	eof      bool
}

// NewReader returns a Reader for the archive r. opts may be nil.
func NewReader(r io.Reader, opts *ReaderOptions) *Reader {
	rd := &Reader{opts: opts.withDefaults()}
	rd.cr.r = r
	rd.tr = tar.NewReader(&rd.cr)
	return rd
}

// countingReader counts the bytes read through it, which gives archive
// offsets (archive/tar reads headers and data without reading ahead).
type countingReader struct {
	r   io.Reader
	n   int64
	err error // first error other than io.EOF from r: an I/O failure, not damage
}

// Seek lets archive/tar skip member data without reading it when the
// underlying reader can seek (an mmap, a ranged store reader); the count
// follows the new position.
func (c *countingReader) Seek(off int64, whence int) (int64, error) {
	sk, ok := c.r.(io.Seeker)
	if !ok {
		return 0, errNoSeek
	}
	n, err := sk.Seek(off, whence)
	if err != nil {
		return n, err
	}
	c.n = n
	return n, nil
}

// errNoSeek tells archive/tar to read through data it skips.
var errNoSeek = errors.New("wds: reader cannot seek")

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if err != nil && err != io.EOF && c.err == nil {
		c.err = err
	}
	return n, err
}

// ioError returns the underlying reader's failure, if any, wrapped with the
// offset, so that I/O errors are not reported as corruption.
func (c *countingReader) ioError() error {
	if c.err == nil {
		return nil
	}
	return fmt.Errorf("wds: read at offset %d: %w", c.n, c.err)
}

func pad512(n int64) int64 { return (n + 511) &^ 511 }

// readMember returns the next member that belongs to a sample, or io.EOF at
// the end of the archive.
func (r *Reader) readMember() (*member, error) {
	if r.mem != nil {
		return r.readMemberFast()
	}
	if r.rs != nil {
		return r.readMemberStream()
	}
	for {
		before := r.next
		h, err := r.tr.Next()
		if err == io.EOF {
			if ioErr := r.cr.ioError(); ioErr != nil {
				return nil, ioErr
			}
			if r.cr.n < r.next {
				// archive/tar ends quietly when the padding after a
				// member's data is cut short; Python's tarfile and GNU tar
				// call that a truncated archive, and members after the cut
				// would be lost without a word.
				return nil, &CorruptError{Member: r.last, Offset: r.cr.n, Reason: fmt.Sprintf(
					"archive ends %d bytes into the padding that runs to offset %d (truncated)", 512-(r.next-r.cr.n), r.next),
					Err: io.ErrUnexpectedEOF}
			}
			return nil, io.EOF
		}
		if err != nil {
			if ioErr := r.cr.ioError(); ioErr != nil {
				return nil, ioErr
			}
			if errors.Is(err, io.ErrUnexpectedEOF) && r.cr.n < r.next && r.last != "" {
				// archive/tar met the end skipping the last member's data:
				// name that member, not a header past the end.
				return nil, &CorruptError{Member: r.last, Offset: r.lastHdr, Reason: fmt.Sprintf(
					"archive ends before the member's data and padding end at offset %d (truncated, or a forged size in its header)", r.next),
					Err: io.ErrUnexpectedEOF}
			}
			return nil, &CorruptError{Offset: before, Reason: "bad tar header", Err: err}
		}
		r.last, r.lastHdr = h.Name, before
		switch h.Typeflag {
		case tar.TypeLink, tar.TypeSymlink, tar.TypeChar, tar.TypeBlock, tar.TypeDir, tar.TypeFifo:
			r.next = r.cr.n // header-only types carry no data
		default:
			if h.Size >= 0 && h.Size < 1<<62 {
				r.next = pad512(r.cr.n + h.Size)
			}
		}
		sparse := isSparse(h)
		if sparse {
			// archive/tar gives the expanded size; the stored bytes are
			// fewer and unknown here, so the truncation check is off.
			r.next = r.cr.n
		}
		// The reader maps old-style TypeRegA to TypeReg; Python's tarfile
		// also counts contiguous and sparse files as regular.
		if h.Typeflag != tar.TypeReg && h.Typeflag != tar.TypeCont && h.Typeflag != tar.TypeGNUSparse {
			continue
		}
		if isMeta(h.Name) {
			continue
		}
		if why := checkName(h.Name); why != "" {
			return nil, &CorruptError{Member: h.Name, Offset: before, Reason: why}
		}
		key, field, ok := SplitName(h.Name)
		if !ok {
			continue
		}
		if sparse {
			// Its bytes are not stored in one piece: no span can point at
			// them, and the span of its expanded size would run past them.
			return nil, &CorruptError{Member: h.Name, Offset: before,
				Reason: "sparse member (written by tar --sparse): store the file whole (tar without -S)", Err: ErrUnsupported}
		}
		m := &member{name: h.Name, key: key, field: field, hdrOff: before, dataOff: r.cr.n, size: h.Size}
		if h.Size < 0 || h.Size > r.opts.MaxMemberSize {
			return nil, &CorruptError{Member: h.Name, Offset: before,
				Reason: fmt.Sprintf("member size %d over limit %d", h.Size, r.opts.MaxMemberSize), Err: ErrTooLarge}
		}
		if r.skip {
			return m, nil
		}
		data, err := readData(r.tr, h.Size)
		if err != nil {
			if ioErr := r.cr.ioError(); ioErr != nil {
				return nil, ioErr
			}
			return nil, &CorruptError{Member: h.Name, Offset: m.dataOff, Reason: "short member data", Err: err}
		}
		m.data = data
		return m, nil
	}
}

// isSparse reports whether h is a sparse file: GNU's old sparse type, or a
// PAX header with GNU's sparse records (formats 0.0, 0.1 and 1.0).
func isSparse(h *tar.Header) bool {
	if h.Typeflag == tar.TypeGNUSparse {
		return true
	}
	for k := range h.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return true
		}
	}
	return false
}

// readData reads exactly n bytes. Small members get one exact allocation;
// large ones grow with the bytes that actually arrive, so a forged size in
// a short archive cannot force a large allocation.
func readData(r io.Reader, n int64) ([]byte, error) {
	const exact = 1 << 20
	if n <= exact {
		b := make([]byte, n)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, unexpected(err)
		}
		return b, nil
	}
	b, err := io.ReadAll(io.LimitReader(r, n))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) != n {
		return nil, io.ErrUnexpectedEOF
	}
	return b, nil
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// Next advances to the next sample and reports whether there is one.
func (r *Reader) Next() bool {
	if r.err != nil {
		return false
	}
	first := r.pending
	r.pending = nil
	if first == nil {
		if r.eof {
			return false
		}
		m, err := r.readMember()
		if err == io.EOF {
			r.eof = true
			return false
		}
		if err != nil {
			r.err = err
			return false
		}
		first = m
	}
	r.sample = Sample{Key: first.key, Order: r.sample.Order[:0]}
	if !r.skip {
		r.sample = Sample{Key: first.key, Fields: make(map[string][]byte, 4)}
	}
	r.spans = r.spans[:0]
	r.start = first.hdrOff
	var total int64
	add := func(m *member) error {
		if r.hasSpan(m.field) {
			return &CorruptError{Member: m.fullName(), Offset: m.hdrOff,
				Reason: fmt.Sprintf("field %q repeated in sample %q", m.field, m.key)}
		}
		if len(r.spans) >= r.opts.MaxFields {
			return &CorruptError{Member: m.fullName(), Offset: m.hdrOff,
				Reason: fmt.Sprintf("sample %q has more than %d fields (over limit)", m.key, r.opts.MaxFields), Err: ErrTooLarge}
		}
		total += m.size
		if total > r.opts.MaxSampleSize {
			return &CorruptError{Member: m.fullName(), Offset: m.hdrOff,
				Reason: fmt.Sprintf("sample %q size over limit %d", m.key, r.opts.MaxSampleSize), Err: ErrTooLarge}
		}
		if !r.skip {
			r.sample.Fields[m.field] = m.data
		}
		r.sample.Order = append(r.sample.Order, m.field)
		r.spans = append(r.spans, FieldSpan{Name: m.field, Offset: m.dataOff, Size: m.size})
		r.end = pad512(m.dataOff + m.size)
		return nil
	}
	// first may be overwritten by the reads below (readMemberStream
	// reuses members): keep its key.
	key := first.key
	if err := add(first); err != nil {
		r.err = err
		return false
	}
	for {
		m, err := r.readMember()
		if err == io.EOF {
			r.eof = true
			return true
		}
		if err != nil {
			r.err = err
			return false
		}
		if m.key != key {
			r.pending = m
			return true
		}
		if err := add(m); err != nil {
			r.err = err
			return false
		}
	}
}

func (r *Reader) hasSpan(field string) bool {
	for _, s := range r.spans {
		if s.Name == field {
			return true
		}
	}
	return false
}

// Sample returns the current sample. It is valid until the next call to
// Next; the field byte slices are not reused and may be kept.
func (r *Reader) Sample() *Sample { return &r.sample }

// Span returns the byte range [start, end) of the current sample in the
// archive, from its first member's header to the end of its last member's
// padded data.
func (r *Reader) Span() (start, end int64) { return r.start, r.end }

// Fields returns where each field of the current sample lies in the
// archive, in archive order. The slice is reused by Next.
func (r *Reader) Fields() []FieldSpan { return r.spans }

// Err returns the first error met, or nil at a clean end of archive.
func (r *Reader) Err() error { return r.err }
