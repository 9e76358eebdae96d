package wds

import (
	"archive/tar"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
)

// errFallback tells OpenShard that the fast header scanner met something it
// does not handle (PAX or GNU extension headers, base-256 numbers, a bad
// checksum, truncation, anything unusual): the archive is then indexed
// again by the general reader (archive/tar), which decides what it means.
// The fast path only ever accepts archives the general reader reads the
// same way.
var errFallback = errors.New("wds: fast scan not applicable")

var zeroBlock [512]byte

// readMemberFast is readMember for an archive held in memory whose headers
// are plain USTAR or GNU blocks.
func (r *Reader) readMemberFast() (*member, error) {
	data := r.mem
	for {
		pos := r.next
		if pos == int64(len(data)) {
			return nil, io.EOF
		}
		if pos+512 > int64(len(data)) {
			return nil, errFallback
		}
		h := data[pos : pos+512]
		if [512]byte(h) == zeroBlock {
			if pos+1024 <= int64(len(data)) && [512]byte(data[pos+512:pos+1024]) == zeroBlock {
				return nil, io.EOF
			}
			return nil, errFallback
		}
		typ, name, size, ok := parseFastHeader(h)
		if !ok {
			return nil, errFallback
		}
		dataOff := pos + 512
		if dataOff+pad512(size) > int64(len(data)) {
			return nil, errFallback
		}
		r.next = dataOff + pad512(size)
		if typ != tar.TypeReg && typ != tar.TypeCont {
			continue
		}
		if isMeta(name) {
			continue
		}
		if why := checkName(name); why != "" {
			return nil, &CorruptError{Member: name, Offset: pos, Reason: why}
		}
		key, field, ok := SplitName(name)
		if !ok {
			continue
		}
		if size > r.opts.MaxMemberSize {
			return nil, &CorruptError{Member: name, Offset: pos,
				Reason: fmt.Sprintf("member size %d over limit %d", size, r.opts.MaxMemberSize), Err: ErrTooLarge}
		}
		m := &member{name: name, key: key, field: field, hdrOff: pos, dataOff: dataOff, size: size}
		if !r.skip {
			m.data = data[dataOff : dataOff+size : dataOff+size]
		}
		return m, nil
	}
}

// parseFastHeader decodes a USTAR or GNU header block the way archive/tar
// does, or reports !ok for anything it would treat specially. size is the
// number of data bytes that follow (0 for header-only types).
func parseFastHeader(h []byte) (typ byte, name string, size int64, ok bool) {
	typ, nb, prefix, size, ok := parseFastBlock(h)
	if !ok {
		return 0, "", 0, false
	}
	if len(prefix) > 0 {
		return typ, string(prefix) + "/" + string(nb), size, true
	}
	return typ, string(nb), size, true
}

// parseFastBlock is parseFastHeader with the name left in h: the member's
// name is prefix + "/" + name when prefix (USTAR's) is not empty, name
// otherwise.
func parseFastBlock(h []byte) (typ byte, name, prefix []byte, size int64, ok bool) {
	sum := blockSum((*[512]byte)(h)) - blockSum8(h[148:156]) + 8*' '
	chk, ok := chksumOctal(h[148:156])
	if !ok || chk != sum {
		return 0, nil, nil, 0, false
	}
	ustar := string(h[257:263]) == "ustar\x00" && string(h[263:265]) == "00"
	gnu := string(h[257:263]) == "ustar " && string(h[263:265]) == " \x00"
	if !ustar && !gnu {
		return 0, nil, nil, 0, false
	}
	if ustar && string(h[508:512]) == "tar\x00" { // star
		return 0, nil, nil, 0, false
	}
	// Mode, uid, gid, mtime, devmajor, devminor: archive/tar parses them,
	// and fails on a malformed one.
	if !octal8(h[100:108]) || !octal8(h[108:116]) || !octal8(h[116:124]) || !octal12(h[136:148]) ||
		!octal8(h[329:337]) || !octal8(h[337:345]) {
		return 0, nil, nil, 0, false
	}
	if gnu && (h[345] != 0 && !octal12(h[345:357]) || h[357] != 0 && !octal12(h[357:369])) {
		return 0, nil, nil, 0, false // atime, ctime
	}
	size, ok = sizeOctal(h[124:136])
	if !ok {
		return 0, nil, nil, 0, false
	}
	name = cBytes(h[0:100])
	if ustar {
		prefix = cBytes(h[345:500])
	}
	typ = h[156]
	switch typ {
	case tar.TypeReg, tar.TypeCont:
	case 0: // the old TypeRegA: a regular file, or a directory by its trailing slash
		typ = tar.TypeReg
		if len(name) > 0 && name[len(name)-1] == '/' || len(name) == 0 && len(prefix) > 0 {
			typ, size = tar.TypeDir, 0
		}
	case tar.TypeLink, tar.TypeSymlink, tar.TypeChar, tar.TypeBlock, tar.TypeDir, tar.TypeFifo:
		size = 0 // header-only: archive/tar skips no data for them
	default:
		return 0, nil, nil, 0, false
	}
	return typ, name, prefix, size, true
}

// octal8 and octal12 report whether fastOctal accepts the 8- or 12-byte
// numeric field b, checking the form tar writers use (digits, then one
// NUL or space) eight bytes at a time, and calling fastOctal otherwise.
func octal8(b []byte) bool {
	x := binary.LittleEndian.Uint64(b[:8])
	if t := x >> 56; (t == 0 || t == ' ') && x&0x00f8f8f8f8f8f8f8 == 0x0030303030303030 {
		return true
	}
	_, ok := fastOctal(b)
	return ok
}

func octal12(b []byte) bool {
	x := binary.LittleEndian.Uint64(b[:8])
	y := binary.LittleEndian.Uint32(b[8:12])
	if t := y >> 24; (t == 0 || t == ' ') && x&0xf8f8f8f8f8f8f8f8 == 0x3030303030303030 && y&0x00f8f8f8 == 0x00303030 {
		return true
	}
	_, ok := fastOctal(b)
	return ok
}

// chksumOctal is fastOctal for the 8-byte checksum field, quicker in the
// form tar writers use: six digits, then NUL and space (or two NULs or
// spaces).
func chksumOctal(b []byte) (int64, bool) {
	x := binary.LittleEndian.Uint64(b[:8])
	if t, u := x>>48&0xff, x>>56; (t == 0 || t == ' ') && (u == 0 || u == ' ') && x&0x0000f8f8f8f8f8f8 == 0x0000303030303030 {
		var n int64
		for _, c := range b[:6] {
			n = n<<3 | int64(c&7)
		}
		return n, true
	}
	return fastOctal(b)
}

// sizeOctal is fastOctal for the 12-byte size field, quicker in the form
// tar writers use: eleven digits, then NUL or space.
func sizeOctal(b []byte) (int64, bool) {
	x := binary.LittleEndian.Uint64(b[:8])
	y := binary.LittleEndian.Uint32(b[8:12])
	if t := y >> 24; (t == 0 || t == ' ') && x&0xf8f8f8f8f8f8f8f8 == 0x3030303030303030 && y&0x00f8f8f8 == 0x00303030 {
		var n int64
		for _, c := range b[:11] {
			n = n<<3 | int64(c&7)
		}
		return n, true
	}
	return fastOctal(b)
}

// fastOctal parses a numeric field as archive/tar's parseOctal does, but
// only the plain octal form (no base-256).
func fastOctal(b []byte) (int64, bool) {
	if len(b) > 0 && b[0]&0x80 != 0 {
		return 0, false
	}
	i, j := 0, len(b)
	for i < j && (b[i] == ' ' || b[i] == 0) {
		i++
	}
	for j > i && (b[j-1] == ' ' || b[j-1] == 0) {
		j--
	}
	var n int64
	for _, c := range b[i:j] {
		if c < '0' || c > '7' || n > 1<<58 {
			return 0, false
		}
		n = n*8 + int64(c-'0')
	}
	return n, true
}

// cBytes returns b up to its first NUL.
func cBytes(b []byte) []byte {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return b[:i]
	}
	return b
}

// blockSum returns the sum of the bytes of a 512-byte block, 32 at a
// time in two sets of four 16-bit lanes (16 rounds add at most 4×255 to a
// lane each: no overflow).
func blockSum(h *[512]byte) int64 {
	const lo = 0x00ff00ff00ff00ff
	var even, odd uint64
	for i := 0; i < 512; i += 32 {
		c := (*[32]byte)(h[i : i+32])
		w, x := binary.LittleEndian.Uint64(c[0:8]), binary.LittleEndian.Uint64(c[8:16])
		y, z := binary.LittleEndian.Uint64(c[16:24]), binary.LittleEndian.Uint64(c[24:32])
		even += w&lo + x&lo + y&lo + z&lo
		odd += (w>>8)&lo + (x>>8)&lo + (y>>8)&lo + (z>>8)&lo
	}
	acc := even&0x0000ffff0000ffff + (even>>16)&0x0000ffff0000ffff +
		odd&0x0000ffff0000ffff + (odd>>16)&0x0000ffff0000ffff
	return int64(acc&0xffffffff + acc>>32)
}

func blockSum8(b []byte) int64 {
	var n int64
	for _, c := range b {
		n += int64(c)
	}
	return n
}

// readMemberStream is readMemberFast for a seekable stream: it reads each
// header block, then (as archive/tar does when it skips a member) seeks to
// the member's last data byte, reads it and reads the padding, writing all
// it reads to r.h. The stream is always positioned at r.next.
func (r *Reader) readMemberStream() (*member, error) {
	for {
		pos := r.next
		blk, err := r.header()
		if err == io.EOF {
			return nil, io.EOF
		}
		if err != nil {
			return nil, errFallback
		}
		if blk[0] == 0 && [512]byte(blk) == zeroBlock {
			blk, err := r.header()
			if err == io.EOF {
				return nil, io.EOF
			}
			if err != nil || [512]byte(blk) != zeroBlock {
				return nil, errFallback
			}
			return nil, io.EOF
		}
		typ, name, prefix, size, ok := parseFastBlock(blk)
		if !ok {
			return nil, errFallback
		}
		dataOff := pos + 512
		var m *member
		if typ == tar.TypeReg || typ == tar.TypeCont {
			if len(prefix) > 0 {
				r.nameBuf = append(append(append(r.nameBuf[:0], prefix...), '/'), name...)
				name = r.nameBuf
			}
			var err error
			if m, err = r.streamMember(name, pos, size); err != nil {
				return nil, err
			}
		}
		if err := r.skipData(size); err != nil {
			return nil, errFallback
		}
		r.next = dataOff + pad512(size)
		if m != nil {
			return m, nil
		}
	}
}

// streamMember returns the member of the regular file named name whose
// header is at pos, or nil when it belongs to no sample. It is
// readMemberFast's check of a member without making strings of its name:
// the key is the previous member's when it is the same, the field one of
// the last few seen, and the name is kept in the member's own buffer for
// errors (see member.fullName).
func (r *Reader) streamMember(name []byte, pos, size int64) (*member, error) {
	if isMeta(string(name)) {
		return nil, nil
	}
	if why := checkName(string(name)); why != "" {
		return nil, &CorruptError{Member: string(name), Offset: pos, Reason: why}
	}
	// SplitName's rule.
	d, ok := splitAt(name)
	if !ok {
		return nil, nil
	}
	keyb, fieldb := name[:d], name[d+1:]
	if size > r.opts.MaxMemberSize {
		return nil, &CorruptError{Member: string(name), Offset: pos,
			Reason: fmt.Sprintf("member size %d over limit %d", size, r.opts.MaxMemberSize), Err: ErrTooLarge}
	}
	key := r.mbuf[r.mi].key
	if string(keyb) != key {
		key = string(keyb)
	}
	field := r.fieldName(fieldb)
	// Two members are live at most (a sample's first and the one read
	// after it): alternate between two, not allocate.
	r.mi ^= 1
	m := &r.mbuf[r.mi]
	nameb := append(m.nameb[:0], name...)
	*m = member{nameb: nameb, key: key, field: field, hdrOff: pos, dataOff: pos + 512, size: size}
	return m, nil
}

// fieldName returns the field name (lowercased) of the raw field b,
// allocating only for one not among the last few seen.
func (r *Reader) fieldName(b []byte) string {
	for _, f := range r.fields {
		if f.raw == string(b) {
			return f.lower
		}
	}
	raw := string(b)
	f := fieldName{raw: raw, lower: strings.ToLower(raw)}
	if len(r.fields) < 8 {
		r.fields = append(r.fields, f)
	} else {
		r.fields[r.nf%8] = f
		r.nf++
	}
	return f.lower
}

// fieldName is a raw field name and its lowercase form.
type fieldName struct{ raw, lower string }

// inPlace is implemented by streams that hand out their next bytes without
// copying them (stream's ranged store reader): Next returns the next n
// bytes, valid until the next call, and advances past them; at the end
// it returns what is left, with io.EOF when nothing is and an error when
// fewer than n bytes are.
type inPlace interface {
	Next(n int) ([]byte, error)
}

// header reads the next 512-byte block of the stream and writes it to
// r.h: in place when the stream allows (skipData may have read it already,
// with the member's tail), else into r.blk. It returns io.EOF at the end of
// the stream and another error when the block is cut short (and then
// writes nothing).
func (r *Reader) header() ([]byte, error) {
	if r.ip != nil {
		if b, err := r.ahead, r.aheadErr; b != nil || err != nil {
			r.ahead, r.aheadErr = nil, nil
			return b, err
		}
		b, err := r.ip.Next(512)
		if err == nil && len(b) != 512 {
			err = io.ErrUnexpectedEOF
		}
		if err == nil {
			r.h.Write(b)
		}
		return b, err
	}
	n, err := io.ReadFull(r.rs, r.blk[:])
	if err == io.EOF && n == 0 {
		return nil, io.EOF
	}
	if err == nil {
		r.h.Write(r.blk[:])
	}
	return r.blk[:], err
}

// skipData skips a member's size data bytes and padding as archive/tar
// does: it seeks to the last data byte and reads it, then reads the
// padding.
func (r *Reader) skipData(size int64) error {
	if size > 1 {
		if _, err := r.rs.Seek(size-1, io.SeekCurrent); err != nil {
			return err
		}
	}
	// The last data byte (none for an empty member) and the padding.
	n := pad512(size) - size
	if size >= 1 {
		n++
	}
	if n == 0 {
		return nil
	}
	if r.ip == nil {
		b := r.blk[:n]
		if _, err := io.ReadFull(r.rs, b); err != nil {
			return err
		}
		r.h.Write(b)
		return nil
	}
	// The tail and the next header block, which follows it, in one read
	// and one write to r.h; header returns the block (or what the
	// stream's end made of it) next.
	b, err := r.ip.Next(int(n) + 512)
	switch {
	case len(b) < int(n):
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		return err
	case len(b) == int(n)+512:
		r.ahead = b[n:]
	case len(b) == int(n):
		b, r.aheadErr = b[:n], io.EOF // the stream ends after this member
	default:
		b, r.ahead, r.aheadErr = b[:n], b[n:], io.ErrUnexpectedEOF
	}
	r.h.Write(b)
	return nil
}
