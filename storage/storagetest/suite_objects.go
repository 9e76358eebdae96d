package storagetest

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicedata/sluice/storage"
)

func (s *suite) testMissingKey(t *testing.T) {
	b, w := s.newBucket(t)
	ctx := t.Context()
	Put(t, w, "present", []byte("x"))
	for _, key := range []string{"missing", "dir/missing", "presen", "present/child"} {
		if _, err := b.Stat(ctx, key); !errors.Is(err, storage.ErrNotExist) {
			t.Errorf("Stat(%q) = %v, want ErrNotExist", key, err)
		} else if !strings.Contains(err.Error(), key) {
			t.Errorf("Stat(%q) error %q does not name the key", key, err)
		}
		if r, err := b.NewRangeReader(ctx, key, 0, -1); !errors.Is(err, storage.ErrNotExist) {
			if err == nil {
				r.Close()
			}
			t.Errorf("NewRangeReader(%q) = %v, want ErrNotExist", key, err)
		}
		if r, err := b.NewRangeReader(ctx, key, 0, 0); !errors.Is(err, storage.ErrNotExist) {
			if err == nil {
				r.Close()
			}
			t.Errorf("NewRangeReader(%q, 0, 0) = %v, want ErrNotExist", key, err)
		}
		if !s.opts.ReadOnly {
			if err := b.Delete(ctx, key); !errors.Is(err, storage.ErrNotExist) {
				t.Errorf("Delete(%q) = %v, want ErrNotExist", key, err)
			}
		}
		if ok, err := storage.Exists(ctx, b, key); ok || err != nil {
			t.Errorf("Exists(%q) = %v, %v; want false, nil", key, ok, err)
		}
	}
	if ok, err := storage.Exists(ctx, b, "present"); !ok || err != nil {
		t.Errorf("Exists(present) = %v, %v; want true, nil", ok, err)
	}
}

func (s *suite) testInvalidKey(t *testing.T) {
	b, _ := s.newBucket(t)
	ctx := t.Context()
	for _, key := range []string{"", "/abs", "dir/", "a//b", "./a", "a/./b", "a/../b", "..", "bad\xffutf8", "nul\x00byte"} {
		if _, err := b.Stat(ctx, key); !errors.Is(err, storage.ErrInvalidKey) {
			t.Errorf("Stat(%q) = %v, want ErrInvalidKey", key, err)
		}
		if r, err := b.NewRangeReader(ctx, key, 0, -1); !errors.Is(err, storage.ErrInvalidKey) {
			if err == nil {
				r.Close()
			}
			t.Errorf("NewRangeReader(%q) = %v, want ErrInvalidKey", key, err)
		}
		if s.opts.ReadOnly {
			continue
		}
		w, err := b.NewWriter(ctx, key, nil)
		if err == nil {
			_, err = w.Write([]byte("x"))
			err = errors.Join(err, w.Close())
		}
		if !errors.Is(err, storage.ErrInvalidKey) {
			t.Errorf("writing %q = %v, want ErrInvalidKey", key, err)
		}
		if err := b.Delete(ctx, key); !errors.Is(err, storage.ErrInvalidKey) {
			t.Errorf("Delete(%q) = %v, want ErrInvalidKey", key, err)
		}
	}
}

func (s *suite) testRoundTrip(t *testing.T) {
	b, w := s.newBucket(t)
	ctx := t.Context()
	data := Pattern(1, 100_000)
	Put(t, w, "dir/object.bin", data)
	info, err := b.Stat(ctx, "dir/object.bin")
	if err != nil {
		t.Fatal(err)
	}
	if info.Key != "dir/object.bin" || info.Size != int64(len(data)) {
		t.Errorf("Stat = %+v, want key dir/object.bin size %d", info, len(data))
	}
	// A checksum Stat reports is the object's: ranged downloads are
	// checked against it (storage.RangeCheck), and a wrong one would fail
	// them all.
	if rc := storage.NewRangeCheck(info.Checksum, info.Size); rc != nil {
		rc.Add(0, data[:12345])
		rc.Add(12345, data[12345:])
		if err := rc.Verify("dir/object.bin"); err != nil {
			t.Errorf("Stat's checksum %v: %v", info.Checksum, err)
		}
	}
	if got := Get(t, b, "dir/object.bin"); !bytes.Equal(got, data) {
		t.Errorf("read back %d bytes, differing from the %d written", len(got), len(data))
	}
	if got, want := b.URL("dir/object.bin"), "dir/object.bin"; !strings.HasSuffix(got, want) {
		t.Errorf("URL = %q, want it to end with %q", got, want)
	}
	all, err := storage.ReadAll(ctx, b, "dir/object.bin", int64(len(data)))
	if err != nil || !bytes.Equal(all, data) {
		t.Errorf("ReadAll = %d bytes, %v", len(all), err)
	}
	if _, err := storage.ReadAll(ctx, b, "dir/object.bin", int64(len(data)-1)); err == nil {
		t.Error("ReadAll with a limit below the size succeeded")
	}
}

// testReaderInfo: what a reader of a whole object says of it
// (storage.InfoReader), so that its caller makes no Stat, is what Stat
// says: the size, the time and the ETag. A reader of a range says
// nothing (a range's response describes the range).
func (s *suite) testReaderInfo(t *testing.T) {
	b, w := s.newBucket(t)
	ctx := t.Context()
	data := Pattern(7, 5000)
	Put(t, w, "info.bin", data)
	st, err := b.Stat(ctx, "info.bin")
	if err != nil {
		t.Fatal(err)
	}
	r, err := b.NewRangeReader(ctx, "info.bin", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	r.Close()
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes, %v", len(got), err)
	}
	if info, ok := storage.ReaderInfo(r); ok {
		if info.Key != st.Key || info.Size != st.Size || info.ETag != st.ETag || !info.ModTime.Equal(st.ModTime) {
			t.Errorf("the whole object's reader says %+v, Stat %+v", info, st)
		}
	} else {
		t.Logf("this store's whole-object reader does not describe the object (a Stat follows)")
	}
	r, err = b.NewRangeReader(ctx, "info.bin", 10, 100)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if info, ok := storage.ReaderInfo(r); ok {
		t.Errorf("a range's reader describes the object: %+v", info)
	}
}

func (s *suite) testEmptyObject(t *testing.T) {
	b, w := s.newBucket(t)
	ctx := t.Context()
	Put(t, w, "empty", nil)
	info, err := b.Stat(ctx, "empty")
	if err != nil || info.Size != 0 {
		t.Fatalf("Stat(empty) = %+v, %v", info, err)
	}
	for _, rg := range [][2]int64{{0, -1}, {0, 0}, {0, 10}} {
		got, err := readRange(ctx, b, "empty", rg[0], rg[1])
		if err != nil || len(got) != 0 {
			t.Errorf("read empty [%d,%d) = %q, %v; want nothing", rg[0], rg[1], got, err)
		}
	}
	if r, err := b.NewRangeReader(ctx, "empty", 1, -1); !errors.Is(err, storage.ErrPrecondition) {
		if err == nil {
			r.Close()
		}
		t.Errorf("read empty at 1 = %v, want ErrPrecondition", err)
	}
}

func (s *suite) testRangeEdges(t *testing.T) {
	b, w := s.newBucket(t)
	ctx := t.Context()
	const size = 1000
	data := Pattern(2, size)
	Put(t, w, "obj", data)
	Put(t, w, "short", data[:3])
	tests := []struct {
		name      string
		key       string
		off, n    int64
		want      []byte
		wantError error
	}{
		{"whole", "obj", 0, -1, data, nil},
		{"zero length at start", "obj", 0, 0, []byte{}, nil},
		{"zero length inside", "obj", 500, 0, []byte{}, nil},
		{"zero length at end", "obj", size, 0, []byte{}, nil},
		{"middle", "obj", 10, 20, data[10:30], nil},
		{"first byte", "obj", 0, 1, data[:1], nil},
		{"last byte", "obj", size - 1, 1, data[size-1:], nil},
		{"to end", "obj", 990, -1, data[990:], nil},
		{"exactly to end", "obj", 990, 10, data[990:], nil},
		{"past end is short", "obj", 990, 100, data[990:], nil},
		{"length larger than object", "obj", 0, 1 << 40, data, nil},
		{"off == size", "obj", size, -1, []byte{}, nil},
		{"off == size with length", "obj", size, 5, []byte{}, nil},
		{"off > size", "obj", size + 1, -1, nil, storage.ErrPrecondition},
		{"off far beyond size", "obj", 5000, 10, nil, storage.ErrPrecondition},
		{"short object whole", "short", 0, -1, data[:3], nil},
		{"short object longer range", "short", 1, 100, data[1:3], nil},
		{"short object off > size", "short", 4, 1, nil, storage.ErrPrecondition},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readRange(ctx, b, tt.key, tt.off, tt.n)
			if tt.wantError != nil {
				if !errors.Is(err, tt.wantError) {
					t.Fatalf("read [%d,+%d) = %d bytes, %v; want %v", tt.off, tt.n, len(got), err, tt.wantError)
				}
				return
			}
			if err != nil {
				t.Fatalf("read [%d,+%d): %v", tt.off, tt.n, err)
			}
			if !bytes.Equal(got, tt.want) {
				t.Errorf("read [%d,+%d) = %d bytes, want %d (content equal: %v)", tt.off, tt.n, len(got), len(tt.want), bytes.Equal(got, tt.want))
			}
		})
	}
	if r, err := b.NewRangeReader(ctx, "obj", -1, 10); err == nil {
		r.Close()
		t.Error("negative offset accepted")
	}
}

// OddKeys are keys with characters that need escaping in URLs or paths.
var OddKeys = []string{
	"with space.bin",
	"plus+equals=and&amp.bin",
	"percent%20literal",
	"question?mark#hash",
	"colon:semi;comma,",
	"quote'double\"",
	"tilde~under_score-dash",
	"unicode/日本語/ключ-ü.bin",
	"emoji-🚀",
	"deep/a/b/c/d/e/f/g/h/i/j/leaf",
	".hidden/.dotfile",
	"brackets[1](2){3}",
}

func (s *suite) testOddKeys(t *testing.T) {
	b, w := s.newBucket(t)
	ctx := t.Context()
	for i, key := range OddKeys {
		Put(t, w, key, Pattern(uint64(100+i), 10+i))
	}
	for i, key := range OddKeys {
		info, err := b.Stat(ctx, key)
		if err != nil {
			t.Errorf("Stat(%q): %v", key, err)
			continue
		}
		if info.Key != key || info.Size != int64(10+i) {
			t.Errorf("Stat(%q) = %+v", key, info)
		}
		if got := Get(t, b, key); !bytes.Equal(got, Pattern(uint64(100+i), 10+i)) {
			t.Errorf("read %q: wrong content", key)
		}
	}
	if s.opts.NoList {
		return
	}
	want := slices.Clone(OddKeys)
	slices.Sort(want)
	if diff := cmp.Diff(want, ListKeys(t, b, "")); diff != "" {
		t.Errorf("List mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"unicode/日本語/ключ-ü.bin"}, ListKeys(t, b, "unicode/日")); diff != "" {
		t.Errorf("List(unicode/日) mismatch (-want +got):\n%s", diff)
	}
}
