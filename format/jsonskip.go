package format

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
