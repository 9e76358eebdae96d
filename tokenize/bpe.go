package tokenize

import "unicode/utf8"

// sym is one symbol of the text being merged: text[start:end], linked to
// its live neighbours.
type sym struct {
	start, end int
	prev, next int
	freeze     bool // a user-defined symbol: never merged
}

// pair is a candidate merge of two adjacent symbols.
type pair struct {
	left, right int
	score       float32
	size        int
}

// agenda is a max-heap of pairs: higher score first, then the leftmost,
// as the reference implementation orders them. (Typed, not through
// container/heap, whose interface boxing allocated per push.)
type agenda []pair

func (a agenda) less(i, j int) bool {
	if a[i].score != a[j].score {
		return a[i].score > a[j].score
	}
	return a[i].left < a[j].left
}

func (a *agenda) push(p pair) {
	*a = append(*a, p)
	h := *a
	for i := len(h) - 1; i > 0; {
		parent := (i - 1) / 2
		if !h.less(i, parent) {
			break
		}
		h[i], h[parent] = h[parent], h[i]
		i = parent
	}
}

func (a *agenda) pop() pair {
	h := *a
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < n && h.less(l, m) {
			m = l
		}
		if r < n && h.less(r, m) {
			m = r
		}
		if m == i {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	*a = h
	return top
}

// Encode appends the ids of text to dst (no BOS or EOS: the reference
// implementation's encode adds none by default).
func (s *SentencePiece) Encode(dst []int32, text string) []int32 {
	t := s.normalize(text)
	if t == "" {
		return dst
	}
	// Split into characters; user-defined symbols are matched whole
	// (longest first) and frozen.
	syms := make([]sym, 0, len(t))
	for pos := 0; pos < len(t); {
		n, frozen := 0, false
		for l := min(s.maxUDS, len(t)-pos); l > 0; l-- {
			if s.user[t[pos:pos+l]] {
				n, frozen = l, true
				break
			}
		}
		if n == 0 {
			_, n = utf8.DecodeRuneInString(t[pos:])
		}
		syms = append(syms, sym{start: pos, end: pos + n, prev: len(syms) - 1, next: len(syms) + 1, freeze: frozen})
		pos += n
	}
	syms[len(syms)-1].next = -1

	var rev map[string][2]string // unused pieces: how they were merged
	ag := make(agenda, 0, len(syms))
	add := func(l, r int) {
		if l < 0 || r < 0 || syms[l].freeze || syms[r].freeze {
			return
		}
		p := t[syms[l].start:syms[r].end]
		id, ok := s.ids[p]
		if !ok {
			return
		}
		ag.push(pair{left: l, right: r, score: s.pieces[id].score, size: len(p)})
		if s.pieces[id].typ == typeUnused {
			if rev == nil {
				rev = map[string][2]string{}
			}
			rev[p] = [2]string{t[syms[l].start:syms[l].end], t[syms[r].start:syms[r].end]}
		}
	}
	for i := 1; i < len(syms); i++ {
		add(i-1, i)
	}
	for len(ag) > 0 {
		top := ag.pop()
		l, r := &syms[top.left], &syms[top.right]
		// Stale: one side was merged away or grew since the pair was made.
		if l.end == l.start || r.end == r.start || (l.end-l.start)+(r.end-r.start) != top.size || l.next != top.right {
			continue
		}
		l.end = r.end
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = top.left
		}
		r.start, r.end = 0, 0
		add(l.prev, top.left)
		add(top.left, l.next)
	}
	for i := 0; i >= 0; i = syms[i].next {
		dst = s.emit(dst, t[syms[i].start:syms[i].end], rev)
	}
	return dst
}

// emit appends the id of piece w: unused pieces are split back into the
// pieces they were merged from, unknown ones fall back to bytes.
func (s *SentencePiece) emit(dst []int32, w string, rev map[string][2]string) []int32 {
	id, ok := s.ids[w]
	if !ok {
		for i := 0; i < len(w); i++ {
			dst = append(dst, s.bytes[w[i]])
		}
		return dst
	}
	if s.pieces[id].typ == typeUnused {
		if lr, ok := rev[w]; ok {
			dst = s.emit(dst, lr[0], rev)
			return s.emit(dst, lr[1], rev)
		}
	}
	return append(dst, id)
}
