package format

import "slices"

// The shard entries of one index.json nearly always differ only in their
// sample count and their files' basenames and sizes: a writer emits every
// entry with the same keys, in the same order, with the same spacing and
// the same configuration text. After the full parser accepts an entry,
// the scanner keeps its skeleton: the entry's text with those values
// (the holes) cut out. The next entry is first matched against it: the
// text between the holes must be byte for byte the same, a number hole
// must be a plain JSON integer and a string hole a literal without
// escapes or control characters. An entry that matches is then the
// skeleton's entry with other values in the holes, so the full parser
// would give it the same configuration, the same checks and the same
// digests; only the holes' values are checked (ranges, basenames) and
// recorded. Any entry that does not match, or whose hole values fail a
// check, is parsed by the full parser (which reports its error), and
// becomes the skeleton when it is accepted. The result is identical
// either way: the fast path only skips re-deriving what the literal
// comparison proves unchanged.

// skeleton is the last fully parsed entry with its holes cut out.
type skeleton struct {
	ok bool
	// text holds the literals, one before each hole and one after the
	// last; lit[h] is the end of literal h in text.
	text  []byte
	lit   []int
	holes []skelHole
	cfg   uint32
	// files are the entry's file records in order (kind with hashesSet,
	// the encoded digests in hashes[hashAt[f]:hashAt[f+1]]).
	files  []skelFile
	hashes []byte
}

// skelHole is a value cut out of a skeleton.
type skelHole struct {
	what uint8 // holeSamples, holeName, holeBytes
	file uint8 // index into skeleton.files for holeName and holeBytes
}

const (
	holeSamples uint8 = iota
	holeName          // the content of a basename string literal
	holeBytes
)

type skelFile struct {
	kind       uint8
	hash, hlen uint32 // range of skeleton.hashes
}

// skelSpan is a hole's place in the entry text the skeleton is cut from.
type skelSpan struct {
	sp   span
	hole skelHole
}

// buildSkeleton records the entry just accepted, text[start:end] in the
// parser's window, as the skeleton. files are its records, just
// appended to the output.
func (s *indexScanner) buildSkeleton(start, end int, present [4]bool, cfg uint32, files []compactFile) {
	k := &s.skel
	k.ok = false
	spans := append(s.skelSpans[:0], skelSpan{s.spans[kSamples], skelHole{what: holeSamples}})
	k.files, k.hashes = k.files[:0], k.hashes[:0]
	f := 0
	for kind := range 4 {
		if !present[kind] {
			continue
		}
		if f >= len(files) {
			return
		}
		fs := &s.fileSpans[kind]
		rec := files[f]
		name := span{fs.name.lo + 1, fs.name.hi - 1}
		if name.hi < name.lo {
			return
		}
		spans = append(spans, skelSpan{name, skelHole{holeName, uint8(f)}}, skelSpan{fs.bytes, skelHole{holeBytes, uint8(f)}})
		sf := skelFile{kind: rec.kind, hash: uint32(len(k.hashes)), hlen: rec.hlen}
		k.hashes = append(k.hashes, s.arena[rec.hash:rec.hash+rec.hlen]...)
		k.files = append(k.files, sf)
		f++
	}
	if f != len(files) {
		return
	}
	s.skelSpans = spans
	slices.SortFunc(spans, func(a, b skelSpan) int { return a.sp.lo - b.sp.lo })
	k.text, k.lit, k.holes = k.text[:0], k.lit[:0], k.holes[:0]
	at := start
	for _, h := range spans {
		if h.sp.lo < at || h.sp.hi > end || h.sp.hi < h.sp.lo {
			return // overlapping or outside the entry: no skeleton
		}
		k.text = append(k.text, s.p.b[at:h.sp.lo]...)
		k.lit = append(k.lit, len(k.text))
		k.holes = append(k.holes, h.hole)
		at = h.sp.hi
	}
	k.text = append(k.text, s.p.b[at:end]...)
	k.lit = append(k.lit, len(k.text))
	k.cfg = cfg
	k.ok = true
}

// matchSkeleton parses the entry at p.i if it matches the skeleton,
// appending it to the output, and reports whether it did. It changes
// nothing when it reports false.
func (s *indexScanner) matchSkeleton() bool {
	k := &s.skel
	b, i := s.p.b, s.p.i
	var vals [1 + 2*4]span
	if len(k.holes) > len(vals) {
		return false
	}
	from := 0
	for h, hole := range k.holes {
		lit := k.text[from:k.lit[h]]
		from = k.lit[h]
		if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != string(lit) {
			return false
		}
		i += len(lit)
		j := i
		if hole.what == holeName {
			for j < len(b) && b[j] != '"' {
				if b[j] == '\\' || b[j] < 0x20 {
					return false
				}
				j++
			}
		} else {
			for j < len(b) && b[j]-'0' <= 9 {
				j++
			}
			if j == i || j-i > 18 || (b[i] == '0' && j > i+1) {
				return false
			}
		}
		vals[h] = span{i, j}
		i = j
	}
	lit := k.text[from:]
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != string(lit) {
		return false
	}
	i += len(lit)

	// The holes' values, checked as commitShard and file check them.
	var samples int
	var files [4]compactFile
	nArena := len(s.arena)
	for h, hole := range k.holes {
		t := b[vals[h].lo:vals[h].hi]
		switch hole.what {
		case holeSamples:
			n, err := intText(t, MaxShardSamples)
			if err != nil {
				s.arena = s.arena[:nArena]
				return false
			}
			samples = n
		case holeBytes:
			n, err := intText(t, MaxFileBytes)
			if err != nil {
				s.arena = s.arena[:nArena]
				return false
			}
			files[hole.file].bytes = int64(n)
		case holeName:
			if !basenameOK(t) {
				s.arena = s.arena[:nArena]
				return false
			}
			f := &files[hole.file]
			f.name, f.nlen = uint32(len(s.arena)), uint32(len(t))
			s.arena = append(s.arena, t...)
		}
	}
	for f, sf := range k.files {
		files[f].kind = sf.kind
		if sf.hlen > 0 {
			files[f].hash, files[f].hlen = uint32(len(s.arena)), sf.hlen
			s.arena = append(s.arena, k.hashes[sf.hash:sf.hash+sf.hlen]...)
		}
	}
	if nArena > 1<<32-1<<20 || len(s.arena) > 1<<32-1 || !s.samplesFit(samples, &files) {
		s.arena = s.arena[:nArena]
		return false // commitShard reports it
	}
	// k.files are in kind order, as commitShard appends them.
	s.out.files = append(s.out.files, files[:len(k.files)]...)
	s.out.samples = append(s.out.samples, uint32(samples))
	s.out.config = append(s.out.config, k.cfg)
	s.out.fileOff = append(s.out.fileOff, uint32(len(s.out.files)))
	s.p.i = i
	return true
}

// samplesFit is commitShard's checkSamplesFit for an entry matched by the
// skeleton, whose files are in kind order.
func (s *indexScanner) samplesFit(samples int, files *[4]compactFile) bool {
	want := fileRaw // the file that holds the offsets
	switch s.out.configs[s.skel.cfg].Format {
	case "mds":
	case "json", "csv", "tsv", "xsv":
		want = fileRawMeta
	default:
		return true
	}
	for f := range s.skel.files {
		if files[f].kind&3 == want {
			return checkSamplesFit(samples, files[f].bytes, "") == nil
		}
	}
	return true
}
