package stream

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/sluicedata/sluice/storage"
)

// rangeReader reads an object sequentially through ranged requests and
// seeks by reading through short gaps or starting a new request past long
// ones. Reads past the object's size return io.EOF. Besides io.Reader it
// has Next, which hands out the next bytes in place (wds.Scan reads tar
// headers with it, without copying them out).
//
// The bytes of the open request pass through one buffer, read into from
// the body directly: buf[r:w] holds the object's bytes from offset at on.
// A seek only moves pos; the next read skips forward inside the buffer,
// reads through a gap of at most seekGap, or starts a new request.
type rangeReader struct {
	ctx  context.Context
	b    storage.Bucket
	key  string
	size int64
	pos  int64         // logical position
	rc   io.ReadCloser // the open request (nil: none)
	at   int64         // object offset of buf[r]
	from int64         // where the open request started
	r, w int
	reqs int // requests made, for tests
	*readBuffers
}

// readBuffers is a rangeReader's buffer, reused across its requests and,
// through BuildTarIndex's pool, across shards (allocated on first use).
type readBuffers struct {
	buf []byte
}

// readBuffer is the size of a rangeReader's buffer, and readSmall the most
// each read of a request takes while the request is young (its first
// denseAfter bytes): a request that ends at the next long gap has then
// fetched little past the header. A request read through for denseAfter
// bytes (an archive of small members, read whole) reads up to the whole
// buffer at once: fewer, larger reads, as the whole-GET floor of
// BenchmarkTarIndexBuild (s3-get) does. 256 KiB reads took 1.5–3 ms of
// versitygw's CPU per 64 MB tar of 20 KB members, but added about as much
// system time to the client (3 interleaved rounds, 11 pairs, load 5–8:
// client+server 29.1 against 30.1 ms, within the noise); 512 KiB was no
// different from 1 MiB. (Before the buffer was read into directly, through
// bufio, 1 MiB reads instead of 64 KiB ones had taken the client's CPU
// from 31–34 ms to 24–27 ms.)
const (
	readBuffer = 1 << 20
	readSmall  = 64 << 10
	denseAfter = 256 << 10
)

// maxNext is the most bytes one call of Next hands out: a tar header
// block and the tail of the member before it.
const maxNext = 4 << 10

// open starts a request at pos, after closing the open one.
func (r *rangeReader) open() error {
	r.Close()
	rc, err := r.b.NewRangeReader(r.ctx, r.key, r.pos, r.size-r.pos)
	if err != nil {
		return err
	}
	if r.readBuffers == nil {
		r.readBuffers = new(readBuffers)
	}
	if r.buf == nil {
		r.buf = make([]byte, readBuffer)
	}
	r.rc, r.at, r.from, r.r, r.w = rc, r.pos, r.pos, 0, 0
	r.reqs++
	return nil
}

// adopt makes rc, a read of the whole object from offset 0, the open
// request.
func (r *rangeReader) adopt(rc io.ReadCloser) {
	if r.readBuffers == nil {
		r.readBuffers = new(readBuffers)
	}
	if r.buf == nil {
		r.buf = make([]byte, readBuffer)
	}
	r.rc, r.at, r.from, r.r, r.w, r.pos = rc, 0, 0, 0, 0, 0
	r.reqs++
}

// fill reads from the open request into the buffer, after moving the
// buffered bytes (fewer than maxNext when it is called) to its start.
// While the request is young a read takes at most readSmall bytes, or
// need when more.
func (r *rangeReader) fill(need int) error {
	if r.r > 0 {
		r.w = copy(r.buf, r.buf[r.r:r.w])
		r.r = 0
	}
	end := len(r.buf)
	if r.at-r.from < denseAfter {
		end = min(end, r.w+max(readSmall, need))
	}
	for range 100 {
		n, err := r.rc.Read(r.buf[r.w:end])
		r.w += n
		if n > 0 {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return io.ErrNoProgress
}

// ensure makes the buffer hold the bytes from pos on, n of them at least
// (fewer only at the object's end), starting or ending requests as needed.
func (r *rangeReader) ensure(n int) error {
	if r.rc != nil && (r.pos < r.at || r.pos-r.at > seekGap+int64(r.w-r.r)) {
		r.Close()
	}
	if r.rc == nil {
		if err := r.open(); err != nil {
			return err
		}
	}
	for r.at < r.pos {
		if d := r.pos - r.at; d <= int64(r.w-r.r) {
			r.r += int(d)
			r.at = r.pos
			break
		}
		r.at += int64(r.w - r.r)
		r.r, r.w = 0, 0
		if err := r.fill(0); err != nil {
			return unexpectedEOF(err)
		}
	}
	want := min(int64(n), r.size-r.pos)
	for int64(r.w-r.r) < want {
		if err := r.fill(int(want)); err != nil {
			return unexpectedEOF(err)
		}
	}
	return nil
}

func (r *rangeReader) Read(p []byte) (int, error) {
	if r.pos >= r.size {
		return 0, io.EOF
	}
	if err := r.ensure(1); err != nil {
		return 0, err
	}
	if max := r.size - r.pos; int64(len(p)) > max {
		p = p[:max]
	}
	n := copy(p, r.buf[r.r:r.w])
	r.r += n
	r.at += int64(n)
	r.pos += int64(n)
	return n, nil
}

// Next returns the next n bytes (at most maxNext) and advances past them;
// the slice is the reader's buffer, valid until the next call. At the
// object's end it returns the bytes that are left, with io.EOF when there
// are none and io.ErrUnexpectedEOF when there are fewer than n.
func (r *rangeReader) Next(n int) ([]byte, error) {
	if n > maxNext || n < 0 {
		return nil, fmt.Errorf("stream: read of %d bytes in place exceeds %d", n, maxNext)
	}
	if r.pos >= r.size {
		if n == 0 {
			return nil, nil
		}
		return nil, io.EOF
	}
	if err := r.ensure(n); err != nil {
		return nil, err
	}
	k := min(n, r.w-r.r)
	p := r.buf[r.r : r.r+k]
	r.r += k
	r.at += int64(k)
	r.pos += int64(k)
	if k < n {
		return p, io.ErrUnexpectedEOF
	}
	return p, nil
}

func unexpectedEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

func (r *rangeReader) Seek(off int64, whence int) (int64, error) {
	switch whence {
	case io.SeekCurrent:
		off += r.pos
	case io.SeekEnd:
		off += r.size
	}
	if off < 0 {
		return r.pos, errors.New("stream: seek before the start")
	}
	r.pos = off
	return off, nil
}

// drainLimit is the most unread bytes Close reads through to the end of a
// request, so that its connection goes back to the pool: a body closed
// before its end tears the connection down, and the next request dials a
// new one. A scan stops at the end-of-archive blocks, just short of the
// body's end (the end of file was never read), or before trailing record
// padding.
const drainLimit = 64 << 10

func (r *rangeReader) Close() error {
	if r.rc == nil {
		return nil
	}
	if left := r.size - r.at - int64(r.w-r.r); left <= drainLimit {
		// Best effort: the bytes are discarded, a failure only costs the
		// connection.
		for left >= 0 {
			n, err := r.rc.Read(r.buf[:min(int64(len(r.buf)), left+1)])
			left -= int64(n)
			if err != nil || n == 0 {
				break
			}
		}
	}
	err := r.rc.Close()
	r.rc = nil
	r.r, r.w = 0, 0
	return err
}
