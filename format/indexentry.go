package format

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
)

// commitShard interprets the spans of the entry just scanned. It returns
// which files the entry has (by kind) and its configuration's number.
func (s *indexScanner) commitShard() (present [4]bool, cfg uint32, err error) {
	err = s.commitShardErr(&present, &cfg)
	return present, cfg, err
}

func (s *indexScanner) commitShardErr(present *[4]bool, cfgOut *uint32) error {
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
	var fileBytes [4]int64
	for kind, id := range [4]int{kRawData, kZipData, kRawMeta, kZipMeta} {
		sp := s.spans[id]
		if sp.hi == 0 || string(s.text(sp)) == "null" {
			continue
		}
		if err := s.file(sp, &s.fileSpans[kind], uint8(kind), shardKeyNames[id]); err != nil {
			return err
		}
		present[kind] = true
		fileBytes[kind] = s.out.files[len(s.out.files)-1].bytes
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
		if err := checkSamplesFit(samples, fileBytes[fileRaw], "raw_data"); err != nil {
			return err
		}
	case "json", "csv", "tsv", "xsv":
		if !present[fileRawMeta] {
			return errors.New("missing \"raw_meta\"")
		}
		if present[fileZipMeta] != present[fileZip] {
			return errors.New("\"zip_meta\" and \"zip_data\" disagree")
		}
		if err := checkSamplesFit(samples, fileBytes[fileRawMeta], "raw_meta"); err != nil {
			return err
		}
	}
	s.out.samples = append(s.out.samples, uint32(samples))
	s.out.config = append(s.out.config, cfg)
	s.out.fileOff = append(s.out.fileOff, uint32(len(s.out.files)))
	*cfgOut = cfg
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
