package agentapi

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Frame limits. A peer that announces more is broken or hostile; the
// decoder rejects the frame before allocating anything.
const (
	// MaxFrame bounds a whole frame (header and body) in bytes.
	MaxFrame = 256 << 20
	// MaxHeader bounds the JSON header of a frame in bytes.
	MaxHeader = 4 << 20
	// frameHeadLen is the two u32 length fields at the start of a frame.
	frameHeadLen = 8
)

// ErrFrame marks a malformed frame: bad lengths, a header that is not a JSON
// object, or a truncated stream. Check it with errors.Is.
var ErrFrame = errors.New("agentapi: malformed frame")

// Frame is one decoded protocol message.
type Frame struct {
	// Header is the raw JSON object of the frame.
	Header json.RawMessage
	// Body is the binary payload; empty for most messages.
	Body []byte
}

// AppendFrame appends the encoding of a frame with the given header (any
// value encoding/json can marshal to an object) and body to dst.
func AppendFrame(dst []byte, header any, body []byte) ([]byte, error) {
	h, err := json.Marshal(header)
	if err != nil {
		return dst, fmt.Errorf("agentapi: encode header: %w", err)
	}
	return appendRawFrame(dst, h, body)
}

// AppendFrameHead appends the start of a frame whose body of bodyLen bytes
// the caller sends after it (from buffers of its own, without copying them
// into dst): the length fields and the header.
func AppendFrameHead(dst []byte, header any, bodyLen int) ([]byte, error) {
	h, err := json.Marshal(header)
	if err != nil {
		return dst, fmt.Errorf("agentapi: encode header: %w", err)
	}
	return appendFrameHead(dst, h, bodyLen)
}

func appendFrameHead(dst, h []byte, bodyLen int) ([]byte, error) {
	if len(h) > MaxHeader {
		return dst, fmt.Errorf("%w: header of %d bytes exceeds %d", ErrFrame, len(h), MaxHeader)
	}
	total := 4 + len(h) + bodyLen
	if bodyLen < 0 || total > MaxFrame {
		return dst, fmt.Errorf("%w: frame of %d bytes exceeds %d", ErrFrame, total, MaxFrame)
	}
	dst = binary.LittleEndian.AppendUint32(dst, uint32(total))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(h)))
	return append(dst, h...), nil
}

func appendRawFrame(dst, h, body []byte) ([]byte, error) {
	dst, err := appendFrameHead(dst, h, len(body))
	if err != nil {
		return dst, err
	}
	return append(dst, body...), nil
}

// ParseFrame decodes one frame from the start of b. It returns the frame and
// the number of bytes consumed. The frame's Header and Body alias b. If b
// holds only part of a frame it returns io.ErrUnexpectedEOF.
func ParseFrame(b []byte) (Frame, int, error) {
	if len(b) < frameHeadLen {
		return Frame{}, 0, io.ErrUnexpectedEOF
	}
	total, hlen, err := parseLengths(b[:frameHeadLen])
	if err != nil {
		return Frame{}, 0, err
	}
	end := 4 + int(total)
	if len(b) < end {
		return Frame{}, 0, io.ErrUnexpectedEOF
	}
	f, err := splitFrame(b[frameHeadLen:end], int(hlen))
	if err != nil {
		return Frame{}, 0, err
	}
	return f, end, nil
}

func parseLengths(head []byte) (total, hlen uint32, err error) {
	total = binary.LittleEndian.Uint32(head[0:4])
	hlen = binary.LittleEndian.Uint32(head[4:8])
	switch {
	case total < 4:
		return 0, 0, fmt.Errorf("%w: frame length %d is shorter than its header length field", ErrFrame, total)
	case total > MaxFrame:
		return 0, 0, fmt.Errorf("%w: frame length %d exceeds %d", ErrFrame, total, MaxFrame)
	case hlen > MaxHeader:
		return 0, 0, fmt.Errorf("%w: header length %d exceeds %d", ErrFrame, hlen, MaxHeader)
	case hlen > total-4:
		return 0, 0, fmt.Errorf("%w: header length %d exceeds frame length %d", ErrFrame, hlen, total)
	case hlen < 2:
		return 0, 0, fmt.Errorf("%w: header length %d cannot hold a JSON object", ErrFrame, hlen)
	}
	return total, hlen, nil
}

// splitFrame splits the bytes after the length fields into header and body
// and checks that the header is a JSON object.
func splitFrame(rest []byte, hlen int) (Frame, error) {
	h := rest[:hlen]
	if h[0] != '{' || !json.Valid(h) {
		return Frame{}, fmt.Errorf("%w: header is not a JSON object", ErrFrame)
	}
	return Frame{Header: json.RawMessage(h), Body: rest[hlen:]}, nil
}

// ReadFrame reads one frame from r. buf is reused when it is large enough;
// the returned frame aliases it. A clean end of stream before the first
// byte returns io.EOF; a frame cut short returns io.ErrUnexpectedEOF.
func ReadFrame(r io.Reader, buf []byte) (Frame, []byte, error) {
	var head [frameHeadLen]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return Frame{}, buf, err
	}
	return readFrameRest(r, head, buf)
}

// readFrameRest reads the rest of the frame whose length fields are head
// from r, as ReadFrame.
func readFrameRest(r io.Reader, head [frameHeadLen]byte, buf []byte) (Frame, []byte, error) {
	total, hlen, err := parseLengths(head[:])
	if err != nil {
		return Frame{}, buf, err
	}
	n := int(total) - 4
	if cap(buf) < n {
		// The length was bounded by MaxFrame above; grow geometrically so
		// a stream of growing frames does not reallocate every time.
		buf = make([]byte, n, max(n, 2*cap(buf)))
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return Frame{}, buf, err
	}
	f, err := splitFrame(buf, int(hlen))
	return f, buf, err
}

// Op returns the "op" field of the frame's header.
func (f Frame) Op() (string, error) {
	var h struct {
		Op string `json:"op"`
	}
	if err := json.Unmarshal(f.Header, &h); err != nil {
		return "", fmt.Errorf("%w: %v", ErrFrame, err)
	}
	if h.Op == "" {
		return "", fmt.Errorf("%w: header has no op", ErrFrame)
	}
	return h.Op, nil
}
