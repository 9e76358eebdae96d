package storagetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicedata/sluice/storage"
)

func (s *suite) testOverwriteDelete(t *testing.T) {
	s.writable(t)
	b, _ := s.newBucket(t)
	ctx := t.Context()
	Put(t, b, "k", Pattern(3, 5000))
	Put(t, b, "k", Pattern(4, 300))
	if got := Get(t, b, "k"); !bytes.Equal(got, Pattern(4, 300)) {
		t.Errorf("after overwrite read %d bytes, want the 300 of the second write", len(got))
	}
	if info, err := b.Stat(ctx, "k"); err != nil || info.Size != 300 {
		t.Errorf("Stat after overwrite = %+v, %v", info, err)
	}
	Put(t, b, "k2", []byte("keep"))
	if err := b.Delete(ctx, "k"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := b.Stat(ctx, "k"); !errors.Is(err, storage.ErrNotExist) {
		t.Errorf("Stat after Delete = %v, want ErrNotExist", err)
	}
	if err := b.Delete(ctx, "k"); !errors.Is(err, storage.ErrNotExist) {
		t.Errorf("second Delete = %v, want ErrNotExist", err)
	}
	if !s.opts.NoList {
		if diff := cmp.Diff([]string{"k2"}, ListKeys(t, b, "")); diff != "" {
			t.Errorf("List after Delete (-want +got):\n%s", diff)
		}
	}
	// Deleting the only object of a "directory" and writing it again.
	Put(t, b, "d/e/f", []byte("1"))
	if err := b.Delete(ctx, "d/e/f"); err != nil {
		t.Fatal(err)
	}
	Put(t, b, "d/e", []byte("now a file"))
	if got := Get(t, b, "d/e"); string(got) != "now a file" {
		t.Errorf("d/e = %q", got)
	}
}

func (s *suite) testCancelledWrite(t *testing.T) {
	s.writable(t)
	b, _ := s.newBucket(t)
	Put(t, b, "existing", []byte("old"))
	for _, tc := range []struct{ name, key string }{{"new key", "never"}, {"overwrite", "existing"}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			w, err := b.NewWriter(ctx, tc.key, nil)
			if err != nil {
				t.Fatal(err)
			}
			// Write some bytes, then give up.
			_, werr := w.Write(Pattern(5, 70_000))
			cancel()
			if werr == nil {
				_, werr = w.Write(Pattern(6, 10))
			}
			if cerr := w.Close(); cerr == nil {
				t.Fatal("Close after cancel succeeded")
			} else if !errors.Is(cerr, context.Canceled) && !errors.Is(werr, context.Canceled) {
				t.Errorf("Close after cancel = %v (write: %v), want context.Canceled", cerr, werr)
			}
			if tc.key == "never" {
				if _, err := b.Stat(t.Context(), "never"); !errors.Is(err, storage.ErrNotExist) {
					t.Errorf("cancelled write is visible: Stat = %v", err)
				}
			} else if got := Get(t, b, "existing"); string(got) != "old" {
				t.Errorf("cancelled overwrite changed the object to %d bytes", len(got))
			}
		})
	}
	t.Run("cancelled before first write", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		w, err := b.NewWriter(ctx, "never2", nil)
		if err != nil {
			t.Fatal(err)
		}
		cancel()
		if err := w.Close(); err == nil {
			t.Fatal("Close after cancel succeeded")
		}
		if _, err := b.Stat(t.Context(), "never2"); !errors.Is(err, storage.ErrNotExist) {
			t.Errorf("cancelled write is visible: Stat = %v", err)
		}
	})
	if !s.opts.NoList {
		if diff := cmp.Diff([]string{"existing"}, ListKeys(t, b, "")); diff != "" {
			t.Errorf("List after cancelled writes (-want +got):\n%s", diff)
		}
	}
}

func (s *suite) testFailedWrite(t *testing.T) {
	s.writable(t)
	b, _ := s.newBucket(t)
	// WriteFrom abandons the write when its source fails midway.
	src := io.MultiReader(bytes.NewReader(Pattern(7, 50_000)), iotestErrReader{})
	if _, err := storage.WriteFrom(t.Context(), b, "failed", src, nil); err == nil {
		t.Fatal("WriteFrom with a failing source succeeded")
	}
	if _, err := b.Stat(t.Context(), "failed"); !errors.Is(err, storage.ErrNotExist) {
		t.Errorf("failed write is visible: Stat = %v", err)
	}
}

type iotestErrReader struct{}

func (iotestErrReader) Read([]byte) (int, error) { return 0, errors.New("source broke") }

func (s *suite) testReadOnly(t *testing.T) {
	if !s.opts.ReadOnly {
		t.Skip("writable bucket")
	}
	b, w := s.newBucket(t)
	ctx := t.Context()
	Put(t, w, "k", []byte("x"))
	wr, err := b.NewWriter(ctx, "k2", nil)
	if err == nil {
		err = wr.Close()
	}
	if !errors.Is(err, storage.ErrReadOnly) {
		t.Errorf("NewWriter on a read-only bucket = %v, want ErrReadOnly", err)
	}
	if err := b.Delete(ctx, "k"); !errors.Is(err, storage.ErrReadOnly) {
		t.Errorf("Delete on a read-only bucket = %v, want ErrReadOnly", err)
	}
	if got := Get(t, b, "k"); string(got) != "x" {
		t.Errorf("object changed to %q", got)
	}
}

func (s *suite) testCancelledContext(t *testing.T) {
	b, w := s.newBucket(t)
	Put(t, w, "k", Pattern(8, 1<<20))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := b.Stat(ctx, "k"); !errors.Is(err, context.Canceled) {
		t.Errorf("Stat with a cancelled context = %v, want context.Canceled", err)
	}
	if r, err := b.NewRangeReader(ctx, "k", 0, -1); err == nil {
		_, err = io.Copy(io.Discard, r)
		r.Close()
		if !errors.Is(err, context.Canceled) {
			t.Errorf("reading with a cancelled context = %v, want context.Canceled", err)
		}
	} else if !errors.Is(err, context.Canceled) {
		t.Errorf("NewRangeReader with a cancelled context = %v, want context.Canceled", err)
	}
	if !s.opts.NoList {
		err := b.List(ctx, "", func(storage.ObjectInfo) error { return nil })
		if !errors.Is(err, context.Canceled) {
			t.Errorf("List with a cancelled context = %v, want context.Canceled", err)
		}
	}
	// Cancelling a reader's context midway stops it.
	ctx2, cancel2 := context.WithCancel(t.Context())
	defer cancel2()
	r, err := b.NewRangeReader(ctx2, "k", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := io.ReadFull(r, make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	cancel2()
	if _, err := io.Copy(io.Discard, r); err == nil {
		t.Error("reader kept going after its context was cancelled")
	}
}

func (s *suite) testConcurrentReaders(t *testing.T) {
	b, w := s.newBucket(t)
	const size = 256 << 10
	data := Pattern(9, size)
	Put(t, w, "shared", data)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for range 20 {
				off := r.Int64N(size)
				n := r.Int64N(size - off + 1)
				got, err := readRange(t.Context(), b, "shared", off, n)
				if err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(got, data[off:off+n]) {
					errs <- fmt.Errorf("range [%d,+%d): wrong bytes", off, n)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func (s *suite) testConcurrentWriters(t *testing.T) {
	s.writable(t)
	b, _ := s.newBucket(t)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 4 {
				// Several writers race on "same"; each write is whole.
				Put(t, b, "same", Pattern(uint64(g), 10_000))
				Put(t, b, fmt.Sprintf("w/%d/%d", g, i), Pattern(uint64(g*10+i), 100))
			}
		})
	}
	wg.Wait()
	got := Get(t, b, "same")
	whole := false
	for g := range 8 {
		whole = whole || bytes.Equal(got, Pattern(uint64(g), 10_000))
	}
	if !whole {
		t.Error("concurrent overwrites left a mixed object")
	}
	if !s.opts.NoList {
		if n := len(ListKeys(t, b, "w/")); n != 32 {
			t.Errorf("List(w/) = %d objects, want 32", n)
		}
	}
}
