package storage

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// trickle hands out its data a few KiB per Read, as a socket does, then
// ends with end.
type trickle struct {
	data  []byte
	chunk int
	end   error
}

func (r *trickle) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, r.end
	}
	n := copy(p[:min(len(p), r.chunk)], r.data)
	r.data = r.data[n:]
	return n, nil
}

// writesAt records what it is asked to write.
type writesAt struct {
	buf    []byte
	writes int
}

func (w *writesAt) WriteAt(p []byte, off int64) (int, error) {
	w.writes++
	copy(w.buf[off:], p)
	return len(p), nil
}

// TestCopyAtFillsBuffer: a body read a little at a time is written one
// full buffer per write, reported to progress in full; a body that breaks
// with io.ErrUnexpectedEOF (a truncation a retry resumes) is that error,
// not the object's end; one longer than the limit is noticed.
func TestCopyAtFillsBuffer(t *testing.T) {
	data := make([]byte, 1<<20+77)
	for i := range data {
		data[i] = byte(i * 13)
	}
	buf := make([]byte, copyBufSize)
	w := &writesAt{buf: make([]byte, len(data)+10)}
	var reported int64
	n, err := copyAt(w, 10, &trickle{data: data, chunk: 8 << 10, end: io.EOF}, buf, int64(len(data)), func(k int64) { reported += k })
	if err != nil || n != int64(len(data)) || reported != n {
		t.Fatalf("copyAt = %d, %v (progress %d); want %d, nil", n, err, reported, len(data))
	}
	if !bytes.Equal(w.buf[10:], data) {
		t.Fatal("bytes differ from the body's")
	}
	if want := (len(data) + copyBufSize - 1) / copyBufSize; w.writes != want {
		t.Fatalf("%d writes through a %d-byte buffer, want %d", w.writes, copyBufSize, want)
	}
	w = &writesAt{buf: make([]byte, len(data))}
	_, err = copyAt(w, 0, &trickle{data: data[:500<<10], chunk: 8 << 10, end: io.ErrUnexpectedEOF}, buf, int64(len(data)), nil)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("broken body: err = %v, want io.ErrUnexpectedEOF", err)
	}
	w = &writesAt{buf: make([]byte, len(data))}
	n, err = copyAt(w, 0, &trickle{data: data, chunk: 8 << 10, end: io.EOF}, buf, 1000, nil)
	if err != nil || n <= 1000 {
		t.Fatalf("body longer than the limit: %d, %v; want more than 1000 and nil (the caller reports it)", n, err)
	}
}
