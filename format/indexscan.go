package format

import (
	"errors"
	"fmt"
	"io"
)

// ParseCompactIndex parses index.json text into a CompactIndex. It accepts
// and rejects exactly what ParseIndex does, with the same kind of errors
// (matching ErrCorrupt, naming the shard).
func ParseCompactIndex(b []byte) (*CompactIndex, error) {
	s := &indexScanner{eof: true}
	s.p.b = b
	s.presize(int64(len(b)))
	return s.run()
}

// ReadCompactIndexSize is ReadCompactIndex for a text of about size bytes
// (the length of the file r reads): the index's columns are sized for
// that many bytes of entries at once instead of growing as they fill. A
// wrong size only costs memory or copies (at most a few tens of MB are
// set aside whatever size says).
func ReadCompactIndexSize(r io.Reader, size int64) (*CompactIndex, error) {
	s := &indexScanner{r: r, buf: make([]byte, 0, scanWindow)}
	s.p.b = s.buf
	s.presize(size)
	return s.run()
}

// presize sets aside the output for about n bytes of index text: room
// for the usual entry of a few hundred bytes with two files.
func (s *indexScanner) presize(n int64) {
	n = min(max(n, 0), 64<<20)
	k := int(n/320) + 1
	s.out.samples, s.out.config = make([]uint32, 0, k), make([]uint32, 0, k)
	s.out.fileOff, s.out.files = make([]uint32, 0, k+1), make([]compactFile, 0, 2*k)
	s.arena = make([]byte, 0, n/10)
}

// ReadCompactIndex parses index.json as it arrives from r: it holds a
// window of the text (the largest single shard entry or top-level value,
// at least 256 KiB), never the whole text, so parsing overlaps the
// download and memory is the compact index plus the window. A read error
// is returned as it is (not as ErrCorrupt).
func ReadCompactIndex(r io.Reader) (*CompactIndex, error) {
	s := &indexScanner{r: r, buf: make([]byte, 0, scanWindow)}
	s.p.b = s.buf
	return s.run()
}

const scanWindow = 256 << 10

// indexScanner parses index.json in units (a shard entry, a top-level
// value, a key): a unit that runs into the end of the window is parsed
// again after the window is refilled, so the parsing code itself never
// sees a partial value.
type indexScanner struct {
	r    io.Reader
	buf  []byte
	eof  bool
	rerr error
	p    jsonParser
	mark int // start of the unit being parsed; fill keeps p.b[mark:]

	out    CompactIndex
	arena  []byte
	cfgs   map[string]uint32
	cfgKey []byte
	spans  [numShardKeys]span
	// fileSpans holds the members of the file objects, by kind.
	fileSpans [4]fileSpan
	extra     []extraSpan
	hashes    []hashKV
	version   string
	// skel is the last accepted entry's skeleton (see indexskel.go).
	skel      skeleton
	skelSpans []skelSpan
}

type span struct{ lo, hi int } // hi == 0: absent

type extraSpan struct {
	key string
	sp  span
}

type hashKV struct {
	k []byte
	v span
}

// The keys of a shard entry this package knows; the others go to Extra.
const (
	kFormat = iota
	kVersion
	kSamples
	kSizeLimit
	kCompression
	kHashes
	kRawData
	kZipData
	kRawMeta
	kZipMeta
	kColumnEncodings
	kColumnNames
	kColumnSizes
	kColumns
	kNewline
	kSeparator
	numShardKeys
)

var shardKeyNames = [numShardKeys]string{"format", "version", "samples", "size_limit", "compression",
	"hashes", "raw_data", "zip_data", "raw_meta", "zip_meta", "column_encodings", "column_names",
	"column_sizes", "columns", "newline", "separator"}

// configKeys are the keys that describe the writer configuration (shared
// by the shards of a dataset).
var configKeys = [...]int{kFormat, kSizeLimit, kCompression, kHashes, kColumnEncodings,
	kColumnNames, kColumnSizes, kColumns, kNewline, kSeparator}

func shardKeyID(k []byte) int {
	switch string(k) {
	case "format":
		return kFormat
	case "version":
		return kVersion
	case "samples":
		return kSamples
	case "size_limit":
		return kSizeLimit
	case "compression":
		return kCompression
	case "hashes":
		return kHashes
	case "raw_data":
		return kRawData
	case "zip_data":
		return kZipData
	case "raw_meta":
		return kRawMeta
	case "zip_meta":
		return kZipMeta
	case "column_encodings":
		return kColumnEncodings
	case "column_names":
		return kColumnNames
	case "column_sizes":
		return kColumnSizes
	case "columns":
		return kColumns
	case "newline":
		return kNewline
	case "separator":
		return kSeparator
	}
	return -1
}

// semanticError is a well-formed value that is not a valid index entry.
type semanticError struct{ err error }

func (e semanticError) Error() string { return e.err.Error() }

func isSemantic(err error) bool {
	_, ok := err.(semanticError)
	return ok
}

// fill reads more input, keeping p.b[mark:]. It reports false at the end.
func (s *indexScanner) fill() bool {
	if s.eof {
		return false
	}
	keep := len(s.p.b) - s.mark
	if s.mark > 0 {
		copy(s.buf[:keep], s.p.b[s.mark:])
		s.p.base += int64(s.mark)
		s.p.i -= s.mark
		s.mark = 0
	}
	s.buf = s.buf[:keep]
	if keep == cap(s.buf) {
		nb := make([]byte, keep, 2*cap(s.buf))
		copy(nb, s.buf)
		s.buf = nb
	}
	// Fill the window: a reader that returns little per call must not make
	// units be parsed again for every few bytes.
	for len(s.buf) < cap(s.buf) {
		n, err := s.r.Read(s.buf[len(s.buf):cap(s.buf)])
		s.buf = s.buf[:len(s.buf)+n]
		if err != nil {
			s.eof = true
			if err != io.EOF {
				s.rerr = err
			}
			break
		}
	}
	s.p.b = s.buf
	return true
}

// need makes a byte available at p.i unless the input has ended.
func (s *indexScanner) need() bool {
	for s.p.i >= len(s.p.b) {
		s.mark = s.p.i
		if !s.fill() {
			return false
		}
	}
	return true
}

func (s *indexScanner) ws() {
	for s.need() {
		switch s.p.b[s.p.i] {
		case ' ', '\t', '\n', '\r':
			s.p.i++
		default:
			return
		}
	}
}

// unit runs fn from p.i; when fn fails or ends at the window's end before
// the input does, it undoes fn's output, refills and runs it again.
func (s *indexScanner) unit(fn func() error) error {
	for {
		s.mark = s.p.i
		nShards, nFiles, nArena := len(s.out.samples), len(s.out.files), len(s.arena)
		err := fn()
		if s.eof || (err == nil && s.p.i < len(s.p.b)) || isSemantic(err) {
			// A semantic error is found only in a complete value.
			return err
		}
		s.out.samples, s.out.config = s.out.samples[:nShards], s.out.config[:nShards]
		s.out.fileOff = s.out.fileOff[:nShards+1]
		s.out.files, s.arena = s.out.files[:nFiles], s.arena[:nArena]
		s.p.i = s.mark
		s.fill()
	}
}

func (s *indexScanner) syntax(err error) error {
	return &CorruptError{File: IndexFile, Shard: -1, Sample: -1, Offset: -1, Reason: "bad json", Err: err}
}

func (s *indexScanner) run() (*CompactIndex, error) {
	c, err := s.parse()
	if s.rerr != nil {
		return nil, fmt.Errorf("reading %s: %w", IndexFile, s.rerr)
	}
	return c, err
}

func (s *indexScanner) parse() (*CompactIndex, error) {
	s.out.fileOff = append(s.out.fileOff[:0], 0)
	s.ws()
	if !s.need() {
		return nil, s.syntax(s.p.errf("unexpected end of input"))
	}
	if s.p.b[s.p.i] != '{' {
		if err := s.unit(func() error { return s.p.skip(0) }); err != nil {
			return nil, s.syntax(err)
		}
		if err := s.end(); err != nil {
			return nil, err
		}
		return nil, Corruptf(IndexFile, "top level is not an object")
	}
	s.p.i++
	var sawShards, sawVersion, shardsArray bool
	s.ws()
	if s.need() && s.p.b[s.p.i] == '}' {
		s.p.i++
	} else {
		for {
			s.ws()
			var key string
			err := s.unit(func() error {
				if s.p.i >= len(s.p.b) || s.p.b[s.p.i] != '"' {
					return s.p.errf("expected object key")
				}
				k, err := s.p.str()
				key = k
				return err
			})
			if err != nil {
				return nil, s.syntax(err)
			}
			s.ws()
			if !s.need() || s.p.b[s.p.i] != ':' {
				return nil, s.syntax(s.p.errf("expected ':'"))
			}
			s.p.i++
			s.ws()
			switch key {
			case "shards":
				if !sawShards && !sawVersion {
					s.out.merged = false
				}
				sawShards = true
				s.skel.ok = false
				s.out.samples, s.out.config, s.out.files, s.arena = s.out.samples[:0], s.out.config[:0], s.out.files[:0], s.arena[:0]
				s.out.fileOff = s.out.fileOff[:1]
				ok, err := s.shards()
				if err != nil {
					return nil, err
				}
				shardsArray = ok
			case "version":
				if !sawShards && !sawVersion {
					s.out.merged = true
				}
				sawVersion = true
				err = s.unit(func() error {
					start := s.p.i
					err := s.p.skip(0)
					s.version = string(s.p.b[start:s.p.i])
					return err
				})
			default:
				err = s.unit(func() error { return s.p.skip(0) })
			}
			if err != nil {
				return nil, s.syntax(err)
			}
			s.ws()
			if !s.need() {
				return nil, s.syntax(s.p.errf("expected ',' or '}'"))
			}
			if s.p.b[s.p.i] == ',' {
				s.p.i++
				continue
			}
			if s.p.b[s.p.i] == '}' {
				s.p.i++
				break
			}
			return nil, s.syntax(s.p.errf("expected ',' or '}'"))
		}
	}
	if err := s.end(); err != nil {
		return nil, err
	}
	if err := wantVersionText(s.version, sawVersion); err != nil {
		return nil, &CorruptError{File: IndexFile, Shard: -1, Sample: -1, Offset: -1, Reason: "top level", Err: err}
	}
	if !shardsArray {
		return nil, Corruptf(IndexFile, "missing or non-array \"shards\"")
	}
	s.out.arena = string(s.arena)
	for _, n := range s.out.samples {
		s.out.total += int64(n)
	}
	out := s.out
	return &out, nil
}

// end checks that only whitespace follows the top-level value.
func (s *indexScanner) end() error {
	s.ws()
	if s.need() {
		return s.syntax(s.p.errf("extra data after value"))
	}
	return nil
}

func wantVersionText(v string, present bool) error {
	if !present || !isNumberText(v) {
		return errors.New("missing or non-integer \"version\"")
	}
	if v != "2" {
		return fmt.Errorf("unsupported version %s (want 2)", v)
	}
	return nil
}

func isNumberText(v string) bool {
	return v != "" && (v[0] == '-' || v[0] == 'N' || v[0] == 'I' || (v[0] >= '0' && v[0] <= '9'))
}

// shards parses the value of "shards"; ok is false when it is not an array.
func (s *indexScanner) shards() (ok bool, err error) {
	if !s.need() || s.p.b[s.p.i] != '[' {
		if err := s.unit(func() error { return s.p.skip(0) }); err != nil {
			return false, s.syntax(err)
		}
		return false, nil
	}
	s.p.i++
	s.ws()
	if s.need() && s.p.b[s.p.i] == ']' {
		s.p.i++
		return true, nil
	}
	shard := s.shard
	for {
		s.ws()
		n := len(s.out.samples)
		if n >= MaxIndexShards {
			return false, Corruptf(IndexFile, "more than %d shards exceed the limit of %d", n, MaxIndexShards)
		}
		if err := s.unit(shard); err != nil {
			if se, ok := err.(semanticError); ok {
				return false, &CorruptError{File: IndexFile, Shard: n, Sample: -1, Offset: -1, Err: se.err}
			}
			return false, s.syntax(err)
		}
		s.ws()
		if !s.need() {
			return false, s.syntax(s.p.errf("expected ',' or ']'"))
		}
		switch s.p.b[s.p.i] {
		case ',':
			s.p.i++
			continue
		case ']':
			s.p.i++
			return true, nil
		}
		return false, s.syntax(s.p.errf("expected ',' or ']'"))
	}
}

// shard parses one entry at p.i and appends it to the output.
func (s *indexScanner) shard() error {
	p := &s.p
	if p.i >= len(p.b) {
		return p.errf("unexpected end of input")
	}
	if p.b[p.i] != '{' {
		if err := p.skip(1); err != nil {
			return err
		}
		return semanticError{errors.New("entry is not an object")}
	}
	if s.skel.ok && s.matchSkeleton() {
		return nil
	}
	start, nFiles := p.i, len(s.out.files)
	s.spans = [numShardKeys]span{}
	s.extra = s.extra[:0]
	p.i++
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
	} else {
		for {
			p.ws()
			if p.i >= len(p.b) || p.b[p.i] != '"' {
				return p.errf("expected object key")
			}
			k, esc, err := p.rawStr()
			if err != nil {
				return err
			}
			var key string
			id := -1
			if esc {
				key = s.unescape(k)
				id = shardKeyID([]byte(key))
			} else {
				id = shardKeyID(k)
			}
			p.ws()
			if p.i >= len(p.b) || p.b[p.i] != ':' {
				return p.errf("expected ':'")
			}
			p.i++
			p.ws()
			start := p.i
			if kind := id - kRawData; kind >= 0 && kind < 4 && p.i < len(p.b) && p.b[p.i] == '{' {
				if err := p.scanFile(&s.fileSpans[kind]); err != nil {
					return err
				}
			} else if err := p.skip(2); err != nil {
				return err
			}
			sp := span{start, p.i}
			if id >= 0 {
				s.spans[id] = sp
			} else {
				if !esc {
					key = string(k)
				}
				s.extra = append(s.extra, extraSpan{key, sp})
			}
			p.ws()
			if p.i < len(p.b) && p.b[p.i] == ',' {
				p.i++
				continue
			}
			if p.i < len(p.b) && p.b[p.i] == '}' {
				p.i++
				break
			}
			return p.errf("expected ',' or '}'")
		}
	}
	present, cfg, err := s.commitShard()
	if err != nil {
		return semanticError{err}
	}
	s.buildSkeleton(start, p.i, present, cfg, s.out.files[nFiles:])
	return nil
}

// unescape decodes the content of a string literal that has escapes.
func (s *indexScanner) unescape(raw []byte) string {
	q := jsonParser{b: append(append([]byte{'"'}, raw...), '"')}
	v, _ := q.str() // already checked by rawStr
	return v
}

func (s *indexScanner) text(sp span) []byte { return s.p.b[sp.lo:sp.hi] }
