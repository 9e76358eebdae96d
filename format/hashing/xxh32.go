package hashing

import (
	"encoding/binary"
	"math/bits"
)

// XXH32 (seed 0), written from the published algorithm description.
const (
	p32a uint32 = 2654435761
	p32b uint32 = 2246822519
	p32c uint32 = 3266489917
	p32d uint32 = 668265263
	p32e uint32 = 374761393
)

type xxh32 struct {
	v     [4]uint32
	buf   [16]byte
	nbuf  int
	total uint64
}

func newXXH32() *xxh32 {
	h := &xxh32{}
	h.Reset()
	return h
}

func (h *xxh32) Reset() {
	a, b := p32a, p32b // variables: the sums wrap, as the algorithm wants
	h.v = [4]uint32{a + b, b, 0, -a}
	h.nbuf = 0
	h.total = 0
}

func (h *xxh32) Size() int      { return 4 }
func (h *xxh32) BlockSize() int { return 16 }

func round32(acc, in uint32) uint32 {
	acc += in * p32b
	acc = bits.RotateLeft32(acc, 13)
	return acc * p32a
}

func (h *xxh32) Write(p []byte) (int, error) {
	n := len(p)
	h.total += uint64(n)
	if h.nbuf > 0 {
		c := copy(h.buf[h.nbuf:], p)
		h.nbuf += c
		p = p[c:]
		if h.nbuf < 16 {
			return n, nil
		}
		h.stripe(h.buf[:])
		h.nbuf = 0
	}
	for len(p) >= 16 {
		h.stripe(p[:16])
		p = p[16:]
	}
	h.nbuf = copy(h.buf[:], p)
	return n, nil
}

func (h *xxh32) stripe(b []byte) {
	h.v[0] = round32(h.v[0], binary.LittleEndian.Uint32(b[0:]))
	h.v[1] = round32(h.v[1], binary.LittleEndian.Uint32(b[4:]))
	h.v[2] = round32(h.v[2], binary.LittleEndian.Uint32(b[8:]))
	h.v[3] = round32(h.v[3], binary.LittleEndian.Uint32(b[12:]))
}

func (h *xxh32) Sum32() uint32 {
	var acc uint32
	if h.total >= 16 {
		acc = bits.RotateLeft32(h.v[0], 1) + bits.RotateLeft32(h.v[1], 7) +
			bits.RotateLeft32(h.v[2], 12) + bits.RotateLeft32(h.v[3], 18)
	} else {
		acc = p32e // seed 0 + PRIME32_5
	}
	acc += uint32(h.total)
	b := h.buf[:h.nbuf]
	for len(b) >= 4 {
		acc += binary.LittleEndian.Uint32(b) * p32c
		acc = bits.RotateLeft32(acc, 17) * p32d
		b = b[4:]
	}
	for _, c := range b {
		acc += uint32(c) * p32e
		acc = bits.RotateLeft32(acc, 11) * p32a
	}
	acc ^= acc >> 15
	acc *= p32b
	acc ^= acc >> 13
	acc *= p32c
	acc ^= acc >> 16
	return acc
}

func (h *xxh32) Sum(b []byte) []byte {
	return binary.BigEndian.AppendUint32(b, h.Sum32())
}
