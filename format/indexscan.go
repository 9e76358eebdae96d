package format

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// ParseCompactIndex parses index.json text into a CompactIndex. It accepts
// and rejects exactly what ParseIndex does, with the same kind of errors
// (matching ErrCorrupt, naming the shard).
func ParseCompactIndex(b []byte) (*CompactIndex, error) {
	s := &indexScanner{eof: true}
	s.p.b = b
	// Room for the usual entry of a few hundred bytes with two files.
	n := len(b)/320 + 1
	s.out.samples, s.out.config = make([]uint32, 0, n), make([]uint32, 0, n)
	s.out.fileOff, s.out.files = make([]uint32, 0, n+1), make([]compactFile, 0, 2*n)
	s.arena = make([]byte, 0, len(b)/10)
	return s.run()
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
}

type span struct{ lo, hi int } // hi == 0: absent

type extraSpan struct {
	key string
	sp  span
}

// fileSpan locates the members of a file description.
type fileSpan struct{ name, bytes, hashes span }

// scanFile moves past the object at p.i (a file description), checking it
// as skip does and recording where its basename, bytes and hashes are.
func (p *jsonParser) scanFile(f *fileSpan) error {
	*f = fileSpan{}
	p.i++
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		return nil
	}
	for {
		p.ws()
		if p.i >= len(p.b) || p.b[p.i] != '"' {
			return p.errf("expected object key")
		}
		k, esc, err := p.rawStr()
		if err != nil {
			return err
		}
		p.ws()
		if p.i >= len(p.b) || p.b[p.i] != ':' {
			return p.errf("expected ':'")
		}
		p.i++
		p.ws()
		start := p.i
		if err := p.skip(3); err != nil {
			return err
		}
		var dst *span
		if esc {
			q := jsonParser{b: append(append([]byte{'"'}, k...), '"')}
			ks, _ := q.str()
			k = []byte(ks)
		}
		switch string(k) {
		case "basename":
			dst = &f.name
		case "bytes":
			dst = &f.bytes
		case "hashes":
			dst = &f.hashes
		}
		if dst != nil {
			*dst = span{start, p.i}
		}
		p.ws()
		if p.i < len(p.b) && p.b[p.i] == ',' {
			p.i++
			continue
		}
		if p.i < len(p.b) && p.b[p.i] == '}' {
			p.i++
			return nil
		}
		return p.errf("expected ',' or '}'")
	}
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
	if err := s.commitShard(); err != nil {
		return semanticError{err}
	}
	return nil
}

// unescape decodes the content of a string literal that has escapes.
func (s *indexScanner) unescape(raw []byte) string {
	q := jsonParser{b: append(append([]byte{'"'}, raw...), '"')}
	v, _ := q.str() // already checked by rawStr
	return v
}

func (s *indexScanner) text(sp span) []byte { return s.p.b[sp.lo:sp.hi] }

// commitShard interprets the spans of the entry just scanned.
func (s *indexScanner) commitShard() error {
	if v := s.spans[kVersion]; v.hi-v.lo != 1 || s.p.b[v.lo] != '2' {
		return wantVersionText(string(s.text(v)), v.hi != 0)
	}
	if s.spans[kSamples].hi == 0 {
		return errors.New("missing \"samples\"")
	}
	samples, err := intText(s.text(s.spans[kSamples]), MaxShardSamples)
	if err != nil {
		return fmt.Errorf("\"samples\": %w", err)
	}
	if len(s.arena) > 1<<32-1<<20 {
		return errors.New("index text too large")
	}
	raw := s.spans[kRawData]
	if raw.hi == 0 || string(s.text(raw)) == "null" {
		return errors.New("missing \"raw_data\"")
	}
	var present [4]bool
	for kind, id := range [4]int{kRawData, kZipData, kRawMeta, kZipMeta} {
		sp := s.spans[id]
		if sp.hi == 0 || string(s.text(sp)) == "null" {
			continue
		}
		if err := s.file(sp, &s.fileSpans[kind], uint8(kind), shardKeyNames[id]); err != nil {
			return err
		}
		present[kind] = true
	}
	cfg, err := s.config()
	if err != nil {
		return err
	}
	c := &s.out.configs[cfg]
	if present[fileZip] && c.Compression == "" {
		return errors.New("\"zip_data\" is set but \"compression\" is null")
	}
	switch c.Format {
	case "mds":
		if present[fileRawMeta] || present[fileZipMeta] {
			return errors.New("mds shard has a meta file")
		}
	case "json", "csv", "tsv", "xsv":
		if !present[fileRawMeta] {
			return errors.New("missing \"raw_meta\"")
		}
		if present[fileZipMeta] != present[fileZip] {
			return errors.New("\"zip_meta\" and \"zip_data\" disagree")
		}
	}
	s.out.samples = append(s.out.samples, uint32(samples))
	s.out.config = append(s.out.config, cfg)
	s.out.fileOff = append(s.out.fileOff, uint32(len(s.out.files)))
	return nil
}

// intText is toInt for a value's text.
func intText(t []byte, max int64) (int, error) {
	if len(t) > 0 && len(t) < 19 {
		var n int64
		for _, c := range t {
			if c < '0' || c > '9' {
				n = -1
				break
			}
			n = n*10 + int64(c-'0')
		}
		if n >= 0 && n <= max {
			return int(n), nil
		}
	}
	if !isNumberText(string(t)) || !isJSONInt(string(t)) {
		return 0, errors.New("not an integer")
	}
	n, err := strconv.ParseInt(string(t), 10, 64)
	if err != nil || n < 0 || n > max {
		return 0, fmt.Errorf("value %s out of range [0, %d]", t, max)
	}
	return int(n), nil
}

// file parses a file description (an object, checked by skip) and
// appends its record.
func (s *indexScanner) file(sp span, fs *fileSpan, kind uint8, key string) error {
	if s.p.b[sp.lo] != '{' {
		return fmt.Errorf("%q is not an object", key)
	}
	name, bytes, hashes := fs.name, fs.bytes, fs.hashes
	if name.hi == 0 || s.p.b[name.lo] != '"' {
		return fmt.Errorf("%q: missing or non-string \"basename\"", key)
	}
	f := compactFile{kind: kind, name: uint32(len(s.arena))}
	s.arena = s.appendStringValue(s.arena, name)
	f.nlen = uint32(len(s.arena)) - f.name
	if !basenameOK(s.arena[f.name:]) {
		if err := CheckBasename(string(s.arena[f.name:])); err != nil {
			return fmt.Errorf("%q: %w", key, err)
		}
	}
	if bytes.hi == 0 {
		return fmt.Errorf("%q: missing \"bytes\"", key)
	}
	n, err := intText(s.text(bytes), MaxFileBytes)
	if err != nil {
		return fmt.Errorf("%q: \"bytes\": %w", key, err)
	}
	f.bytes = int64(n)
	if hashes.hi != 0 && string(s.text(hashes)) != "null" {
		if err := s.fileHashes(&f, hashes, key); err != nil {
			return err
		}
	}
	s.out.files = append(s.out.files, f)
	return nil
}

// appendStringValue appends the decoded string literal at sp.
func (s *indexScanner) appendStringValue(dst []byte, sp span) []byte {
	raw := s.p.b[sp.lo+1 : sp.hi-1]
	for _, c := range raw {
		if c == '\\' {
			return append(dst, s.unescape(raw)...)
		}
	}
	return append(dst, raw...)
}

// basenameOK is CheckBasename's fast path: true means name is safe.
func basenameOK(name []byte) bool {
	if len(name) == 0 || name[0] == '/' || (len(name) >= 2 && name[1] == ':') {
		return false
	}
	elem := 0 // bytes of the current element; -1 after "." and 1, -2 after ".."
	dots := 0
	for _, c := range name {
		switch c {
		case '\\', 0:
			return false
		case '/':
			if elem == 0 || elem == dots && dots <= 2 {
				return false
			}
			elem, dots = 0, 0
			continue
		case '.':
			dots++
		}
		elem++
	}
	return !(elem == 0 || elem == dots && dots <= 2)
}

func (s *indexScanner) fileHashes(f *compactFile, sp span, key string) error {
	q := jsonParser{b: s.p.b[:sp.hi], i: sp.lo}
	if q.b[q.i] != '{' {
		return fmt.Errorf("%q: \"hashes\" is not an object", key)
	}
	s.hashes = s.hashes[:0]
	q.i++
	for {
		q.ws()
		if q.b[q.i] == '}' {
			break
		}
		if q.b[q.i] == ',' {
			q.i++
			q.ws()
		}
		k, esc, _ := q.rawStr()
		if esc {
			k = []byte(s.unescape(k))
		}
		q.ws()
		q.i++
		q.ws()
		start := q.i
		_ = q.skip(3)
		v := span{start, q.i}
		i := 0
		for i < len(s.hashes) && string(s.hashes[i].k) != string(k) {
			i++
		}
		if i == len(s.hashes) {
			s.hashes = append(s.hashes, hashKV{k: k})
		}
		s.hashes[i].v = v
	}
	if len(s.hashes) > 64 {
		return fmt.Errorf("%q: too many hashes", key)
	}
	f.kind |= hashesSet
	f.hash = uint32(len(s.arena))
	for _, h := range s.hashes {
		if s.p.b[h.v.lo] != '"' {
			return fmt.Errorf("%q: hash %q is not a string", key, h.k)
		}
		s.arena = binary.AppendUvarint(s.arena, uint64(len(h.k)))
		s.arena = append(s.arena, h.k...)
		lenAt := len(s.arena)
		s.arena = append(s.arena, 0, 0, 0, 0, 0)
		vs := len(s.arena)
		s.arena = s.appendStringValue(s.arena, h.v)
		vn := len(s.arena) - vs
		// Rewrite the length in front of the digest (5 bytes reserved).
		w := binary.PutUvarint(s.arena[lenAt:lenAt+5], uint64(vn))
		copy(s.arena[lenAt+w:], s.arena[vs:])
		s.arena = s.arena[:lenAt+w+vn]
	}
	f.hlen = uint32(len(s.arena)) - f.hash
	return nil
}

// config returns the number of the entry's configuration, parsing and
// checking it the first time its text is seen.
func (s *indexScanner) config() (uint32, error) {
	key := s.cfgKey[:0]
	for _, id := range configKeys {
		sp := s.spans[id]
		if sp.hi == 0 {
			continue
		}
		key = append(key, byte(id))
		key = binary.AppendUvarint(key, uint64(sp.hi-sp.lo))
		key = append(key, s.text(sp)...)
	}
	for _, e := range s.extra {
		key = append(key, 0xff)
		key = binary.AppendUvarint(key, uint64(len(e.key)))
		key = append(key, e.key...)
		key = binary.AppendUvarint(key, uint64(e.sp.hi-e.sp.lo))
		key = append(key, s.text(e.sp)...)
	}
	s.cfgKey = key
	if n, ok := s.cfgs[string(key)]; ok {
		return n, nil
	}
	m := make(map[string]any, len(configKeys)+len(s.extra))
	var extraKeys []string
	for _, id := range configKeys {
		if sp := s.spans[id]; sp.hi != 0 {
			m[shardKeyNames[id]] = s.value(sp)
		}
	}
	for _, e := range s.extra {
		if _, dup := m[e.key]; !dup {
			extraKeys = append(extraKeys, e.key)
		}
		m[e.key] = s.value(e.sp)
	}
	var c ShardInfo
	if err := parseConfig(&c, m, extraKeys); err != nil {
		return 0, err
	}
	if s.cfgs == nil {
		s.cfgs = map[string]uint32{}
	}
	n := uint32(len(s.out.configs))
	s.out.configs = append(s.out.configs, c)
	s.cfgs[string(key)] = n
	return n, nil
}

// value parses the (checked) value at sp.
func (s *indexScanner) value(sp span) any {
	q := jsonParser{b: s.p.b[:sp.hi], i: sp.lo}
	v, _ := q.value(2)
	return v
}

// rawStr moves past the string literal at p.i and returns its content as
// written, and whether it has escapes.
func (p *jsonParser) rawStr() (raw []byte, escaped bool, err error) {
	start := p.i + 1
	for i := start; i < len(p.b); i++ {
		c := p.b[i]
		if c == '"' {
			p.i = i + 1
			return p.b[start:i], false, nil
		}
		if c == '\\' || c < 0x20 {
			break
		}
	}
	if err := p.skipStr(); err != nil {
		return nil, false, err
	}
	return p.b[start : p.i-1], true, nil
}

// skipStr moves past the string literal at p.i, checking it as str does.
func (p *jsonParser) skipStr() error {
	p.i++
	i, b := p.i, p.b
	for i < len(b) && b[i] != '"' && b[i] != '\\' && b[i] >= 0x20 {
		i++
	}
	p.i = i
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			return nil
		case c < 0x20:
			return p.errf("control character in string")
		case c != '\\':
			p.i++
			continue
		}
		p.i++
		if p.i >= len(p.b) {
			break
		}
		e := p.b[p.i]
		p.i++
		switch e {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		case 'u':
			if _, ok := p.hex4(); !ok {
				return p.errf("bad \\u escape")
			}
		default:
			return p.errf("bad escape")
		}
	}
	return p.errf("unterminated string")
}

// skip moves past one value, checking it as value does, without building
// it.
func (p *jsonParser) skip(depth int) error {
	if depth > maxJSONDepth {
		return p.errf("nested too deeply")
	}
	if p.i >= len(p.b) {
		return p.errf("unexpected end of input")
	}
	switch c := p.b[p.i]; {
	case c == '{':
		p.i++
		p.ws()
		if p.i < len(p.b) && p.b[p.i] == '}' {
			p.i++
			return nil
		}
		for {
			p.ws()
			if p.i >= len(p.b) || p.b[p.i] != '"' {
				return p.errf("expected object key")
			}
			if err := p.skipStr(); err != nil {
				return err
			}
			p.ws()
			if p.i >= len(p.b) || p.b[p.i] != ':' {
				return p.errf("expected ':'")
			}
			p.i++
			p.ws()
			if err := p.skip(depth + 1); err != nil {
				return err
			}
			p.ws()
			if p.i < len(p.b) && p.b[p.i] == ',' {
				p.i++
				continue
			}
			if p.i < len(p.b) && p.b[p.i] == '}' {
				p.i++
				return nil
			}
			return p.errf("expected ',' or '}'")
		}
	case c == '[':
		p.i++
		p.ws()
		if p.i < len(p.b) && p.b[p.i] == ']' {
			p.i++
			return nil
		}
		for {
			p.ws()
			if err := p.skip(depth + 1); err != nil {
				return err
			}
			p.ws()
			if p.i < len(p.b) && p.b[p.i] == ',' {
				p.i++
				continue
			}
			if p.i < len(p.b) && p.b[p.i] == ']' {
				p.i++
				return nil
			}
			return p.errf("expected ',' or ']'")
		}
	case c == '"':
		return p.skipStr()
	case p.lit("null"), p.lit("true"), p.lit("false"), p.lit("NaN"), p.lit("Infinity"), p.lit("-Infinity"):
		return nil
	case c == '-' || (c >= '0' && c <= '9'):
		return p.skipNumber()
	}
	return p.errf("unexpected character %q", p.b[p.i])
}
