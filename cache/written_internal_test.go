package cache

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"testing"
	"time"

	"github.com/sluicedata/sluice/storage/memstore"
)

// TestViaPrefetchDoneBeforeCommit holds a fetch between the end of its
// writes and its sync and rename: Via.Prefetch's done is closed already
// (a prefetcher may start its next download while the disk syncs this
// one), its error is nil, and the shard is then committed as usual.
func TestViaPrefetchDoneBeforeCommit(t *testing.T) {
	ctx := context.Background()
	data := bytes.Repeat([]byte("sluice-written-"), 3000)
	c, mb, held, resume := heldCache(t, t.TempDir(), data)
	d, err := c.Add(ctx, &Source{Bucket: mb, Backoff: func(int) time.Duration { return time.Millisecond },
		Shards: []Shard{{Files: []File{{Raw: "s.mds", RawBytes: int64(len(data))}}}}})
	if err != nil {
		t.Fatal(err)
	}
	done, errf := d.Via(nil).Prefetch(0, 1)
	<-held
	select {
	case <-done:
	case <-time.After(time.Minute):
		close(resume)
		t.Fatal("Via.Prefetch's done still open a minute after the shard's bytes were complete (it waits for the sync)")
	}
	if err := errf(); err != nil {
		t.Fatalf("error while the commit runs = %v, want nil", err)
	}
	if d.Present(0) {
		t.Fatal("shard renamed into place while the commit was held")
	}
	close(resume)
	l, err := d.Acquire(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	got, err := os.ReadFile(l.Path(0))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("committed shard: %d bytes, %v; want the %d bytes written", len(got), err, len(data))
	}
}

// TestViaPrefetchFailureReported: a fetch that fails before its bytes
// are complete closes Via.Prefetch's done with its error.
func TestViaPrefetchFailureReported(t *testing.T) {
	ctx := context.Background()
	c, err := Open(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	d, err := c.Add(ctx, &Source{Bucket: memstore.New("src"), Backoff: func(int) time.Duration { return time.Millisecond },
		Shards: []Shard{{Files: []File{{Raw: "missing.mds", RawBytes: 10}}}}})
	if err != nil {
		t.Fatal(err)
	}
	done, errf := d.Via(nil).Prefetch(0, 1)
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("Via.Prefetch of a missing object not done after a minute")
	}
	if err := errf(); err == nil {
		t.Fatal("Via.Prefetch of a missing object: nil error")
	}
}

// TestViaPrefetchFuncBeforeCommit: PrefetchFunc calls its function once,
// with nil, while the fetch is held between its writes and its sync and
// rename (a prefetcher frees its slot there); a second call for the
// shard, joining the same flight past that point, is answered at once;
// one for a missing object gets the fetch's error; one for a shard out
// of range an error at once; one for a shard in place nil.
func TestViaPrefetchFuncBeforeCommit(t *testing.T) {
	ctx := context.Background()
	data := bytes.Repeat([]byte("sluice-notify-"), 3000)
	c, mb, held, resume := heldCache(t, t.TempDir(), data)
	d, err := c.Add(ctx, &Source{Bucket: mb, Backoff: func(int) time.Duration { return time.Millisecond },
		Shards: []Shard{{Files: []File{{Raw: "s.mds", RawBytes: int64(len(data))}}},
			{Files: []File{{Raw: "missing.mds", RawBytes: 10}}}}})
	if err != nil {
		t.Fatal(err)
	}
	calls := make(chan error, 4)
	d.Via(nil).PrefetchFunc(0, 1, func(err error) { calls <- err })
	<-held
	wait := func(what string) error {
		t.Helper()
		select {
		case err := <-calls:
			return err
		case <-time.After(time.Minute):
			close(resume)
			t.Fatalf("%s: PrefetchFunc's function not called after a minute", what)
			return nil
		}
	}
	if err := wait("bytes complete, commit held"); err != nil {
		t.Fatalf("called with %v while the commit runs, want nil", err)
	}
	if d.Present(0) {
		t.Fatal("shard renamed into place while the commit was held")
	}
	called := false
	d.Via(nil).PrefetchFunc(0, 1, func(err error) {
		called = true
		if err != nil {
			t.Errorf("joined flight past its writes: called with %v", err)
		}
	})
	if !called {
		t.Fatal("joined flight past its writes: function not called at once")
	}
	close(resume)
	select {
	case err := <-calls:
		t.Fatalf("function called twice (second: %v)", err)
	default:
	}
	called = false
	d.Via(nil).PrefetchFunc(5, 1, func(err error) { called = err != nil })
	if !called {
		t.Fatal("shard out of range: no error at once")
	}
	d.Via(nil).PrefetchFunc(1, 1, func(err error) { calls <- err })
	if err := wait("missing object"); err == nil {
		t.Fatal("missing object: called with nil")
	}
	l, err := d.Acquire(ctx, 0) // waits for the commit
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	d.Via(nil).PrefetchFunc(0, 1, func(err error) { calls <- err })
	if err := wait("shard in place"); err != nil {
		t.Fatalf("shard in place: called with %v", err)
	}
}

// chunkReader hands out its data a few bytes per Read, as a socket
// does, then ends with end.
type chunkReader struct {
	data  []byte
	chunk int
	end   error
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, r.end
	}
	n := copy(p[:min(len(p), r.chunk)], r.data)
	r.data = r.data[n:]
	return n, nil
}

// countingWriterAt records the writes it gets.
type countingWriterAt struct {
	buf    []byte
	writes int
}

func (w *countingWriterAt) WriteAt(p []byte, off int64) (int, error) {
	w.writes++
	copy(w.buf[off:], p)
	return len(p), nil
}

// TestFillCopyAt: a body read a little at a time is written one full
// buffer per write, at the right offsets; a body that breaks with
// io.ErrUnexpectedEOF (a truncation, which a retry resumes) is reported
// as that error, not taken for the object's end.
func TestFillCopyAt(t *testing.T) {
	data := make([]byte, 5<<20+123)
	for i := range data {
		data[i] = byte(i * 7)
	}
	buf := make([]byte, 1<<20)
	w := &countingWriterAt{buf: make([]byte, len(data)+100)}
	n, err := fillCopyAt(w, 100, &chunkReader{data: data, chunk: 16 << 10, end: io.EOF}, buf)
	if err != nil || n != int64(len(data)) {
		t.Fatalf("fillCopyAt = %d, %v; want %d, nil", n, err, len(data))
	}
	if !bytes.Equal(w.buf[100:], data) {
		t.Fatal("bytes differ from the body's")
	}
	if w.writes != 6 {
		t.Fatalf("%d writes for %d bytes through a %d-byte buffer, want 6", w.writes, len(data), len(buf))
	}
	w = &countingWriterAt{buf: make([]byte, len(data))}
	n, err = fillCopyAt(w, 0, &chunkReader{data: data[:3<<20], chunk: 16 << 10, end: io.ErrUnexpectedEOF}, buf)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("broken body: err = %v, want io.ErrUnexpectedEOF", err)
	}
	if n != 3<<20 || !bytes.Equal(w.buf[:n], data[:n]) {
		t.Fatalf("broken body: %d bytes written, want the %d that arrived", n, 3<<20)
	}
}

// heldCache opens a cache in dir over a memstore holding data as s.mds,
// whose fetches stop between the end of their writes and their sync and
// rename: held is closed when the first fetch gets there, and it goes on
// once the test closes resume. The cache is closed at the end of t.
func heldCache(t *testing.T, dir string, data []byte) (c *Cache, mb *memstore.Bucket, held, resume chan struct{}) {
	t.Helper()
	mb = memWith(t, data, "s.mds")
	c, err := Open(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	held, resume = make(chan struct{}), make(chan struct{})
	c.beforeCommit = func(int) {
		close(held)
		<-resume
	}
	return c, mb, held, resume
}

// memWith returns a memstore holding data under each key.
func memWith(t *testing.T, data []byte, keys ...string) *memstore.Bucket {
	t.Helper()
	mb := memstore.New("src")
	for _, k := range keys {
		w, err := mb.NewWriter(context.Background(), k, nil)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(data)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return mb
}
