package storagetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicedata/sluice/storage"
)

// Options describes what a bucket under test can do. A nil *Options means
// a writable bucket that lists.
type Options struct {
	// ReadOnly says the bucket rejects NewWriter and Delete with an error
	// matching storage.ErrReadOnly; the suite stores its objects through
	// the writable bucket the constructor returns beside it.
	ReadOnly bool
	// NoList says the bucket cannot list: List must fail with an error
	// matching errors.ErrUnsupported.
	NoList bool
	// ManyObjects is the number of objects the pagination subtest lists;
	// set it above 1000 where the store pages at 1000 and writes are cheap.
	// Zero means 40.
	ManyObjects int
	// NoKeyUnderKey says the store cannot hold an object "a" together with
	// objects under "a/", because keys map to files and directories (an S3
	// gateway on a POSIX file system, such as versitygw's posix backend).
	// The listing subtest then leaves such pairs out.
	NoKeyUnderKey bool
}

// Run runs the conformance suite on the writable buckets newBucket returns.
// newBucket must return an empty bucket for each call and arrange its own
// cleanup with t.Cleanup; the cleanup must tolerate a bucket the suite has
// already closed.
func Run(t *testing.T, newBucket func(t *testing.T) storage.Bucket) {
	t.Helper()
	RunWith(t, func(t *testing.T) (storage.Bucket, storage.Bucket) {
		b := newBucket(t)
		return b, b
	}, nil)
}

// RunWith runs the conformance suite on the buckets newBucket returns.
// newBucket returns the bucket under test and a writable bucket whose
// objects appear in it (the same bucket unless opts.ReadOnly). opts may be
// nil.
func RunWith(t *testing.T, newBucket func(t *testing.T) (b, writer storage.Bucket), opts *Options) {
	t.Helper()
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.ManyObjects == 0 {
		o.ManyObjects = 40
	}
	s := &suite{newBucket: newBucket, opts: o}
	t.Run("MissingKey", s.testMissingKey)
	t.Run("InvalidKey", s.testInvalidKey)
	t.Run("RoundTrip", s.testRoundTrip)
	t.Run("EmptyObject", s.testEmptyObject)
	t.Run("RangeEdges", s.testRangeEdges)
	t.Run("OddKeys", s.testOddKeys)
	t.Run("ListOrderAndPrefixes", s.testList)
	t.Run("ListStopsOnError", s.testListStops)
	t.Run("ListPagination", s.testListPagination)
	t.Run("OverwriteAndDelete", s.testOverwriteDelete)
	t.Run("CancelledWrite", s.testCancelledWrite)
	t.Run("FailedWrite", s.testFailedWrite)
	t.Run("ReadOnly", s.testReadOnly)
	t.Run("CancelledContext", s.testCancelledContext)
	t.Run("ConcurrentReaders", s.testConcurrentReaders)
	t.Run("ConcurrentWriters", s.testConcurrentWriters)
	t.Run("Upload", s.testUpload)
	t.Run("Download", s.testDownload)
	t.Run("DownloadAtomic", s.testDownloadAtomic)
	t.Run("Close", s.testClose)
}

type suite struct {
	newBucket func(t *testing.T) (storage.Bucket, storage.Bucket)
	opts      Options
}

// Pattern returns n deterministic bytes that differ per seed, so that a
// read of the wrong range or object is noticed.
func Pattern(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	b := make([]byte, n)
	for i := 0; i < n; i += 8 {
		v := r.Uint64()
		for j := i; j < min(i+8, n); j++ {
			b[j] = byte(v)
			v >>= 8
		}
	}
	return b
}

// Put stores data as key in b through NewWriter and fails t on error.
func Put(t testing.TB, b storage.Bucket, key string, data []byte) {
	t.Helper()
	if _, err := storage.WriteFrom(context.Background(), b, key, bytes.NewReader(data), nil); err != nil {
		t.Fatalf("put %q: %v", key, err)
	}
}

// Get reads the whole object key from b and fails t on error.
func Get(t testing.TB, b storage.Bucket, key string) []byte {
	t.Helper()
	data, err := readRange(context.Background(), b, key, 0, -1)
	if err != nil {
		t.Fatalf("get %q: %v", key, err)
	}
	return data
}

func readRange(ctx context.Context, b storage.Bucket, key string, off, n int64) (data []byte, err error) {
	r, err := b.NewRangeReader(ctx, key, off, n)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, r.Close()) }()
	return io.ReadAll(r)
}

// ListKeys returns the keys List reports under prefix, failing t on error.
func ListKeys(t testing.TB, b storage.Bucket, prefix string) []string {
	t.Helper()
	keys := []string{}
	err := b.List(context.Background(), prefix, func(info storage.ObjectInfo) error {
		keys = append(keys, info.Key)
		return nil
	})
	if err != nil {
		t.Fatalf("list %q: %v", prefix, err)
	}
	return keys
}

func (s *suite) writable(t *testing.T) {
	t.Helper()
	if s.opts.ReadOnly {
		t.Skip("read-only bucket")
	}
}

func (s *suite) listing(t *testing.T) {
	t.Helper()
	if s.opts.NoList {
		t.Skip("bucket cannot list")
	}
}

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

func (s *suite) testList(t *testing.T) {
	s.listing(t)
	b, w := s.newBucket(t)
	// "a/b" sorts after "a-b" and "a.b" ('-' and '.' are below '/') and
	// before "a0": a store that walks directories naively gets this wrong.
	// (No key is also the parent of another, which file systems forbid.)
	keys := []string{"a-b", "a.b", "a/b", "a/c/d", "a/c0", "a0", "ab", "b/x/y", "b/x/z", "c"}
	if s.opts.NoKeyUnderKey {
		keys = slices.DeleteFunc(keys, func(k string) bool { return k == "a" })
	}
	for i, k := range slices.Backward(keys) {
		Put(t, w, k, Pattern(uint64(i), i))
	}
	tests := []struct {
		prefix string
		want   []string
	}{
		{"", keys},
		{"a", []string{"a-b", "a.b", "a/b", "a/c/d", "a/c0", "a0", "ab"}},
		{"a/", []string{"a/b", "a/c/d", "a/c0"}},
		{"a/c", []string{"a/c/d", "a/c0"}},
		{"a/c/", []string{"a/c/d"}},
		{"a-", []string{"a-b"}},
		{"b/x", []string{"b/x/y", "b/x/z"}},
		{"b/x/y", []string{"b/x/y"}},
		{"zz", []string{}},
		{"a/b/", []string{}},
	}
	for _, tt := range tests {
		if s.opts.NoKeyUnderKey {
			tt.want = slices.DeleteFunc(slices.Clone(tt.want), func(k string) bool { return k == "a" })
		}
		if diff := cmp.Diff(tt.want, ListKeys(t, b, tt.prefix)); diff != "" {
			t.Errorf("List(%q) mismatch (-want +got):\n%s", tt.prefix, diff)
		}
	}
	sizes := map[string]int64{}
	err := b.List(t.Context(), "", func(info storage.ObjectInfo) error {
		sizes[info.Key] = info.Size
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range slices.Backward(keys) {
		if sizes[k] != int64(i) {
			t.Errorf("List reports size %d for %q, want %d", sizes[k], k, i)
		}
	}
}

func (s *suite) testListStops(t *testing.T) {
	if s.opts.NoList {
		b, _ := s.newBucket(t)
		err := b.List(t.Context(), "", func(storage.ObjectInfo) error { return nil })
		if !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("List on a bucket that cannot list = %v, want errors.ErrUnsupported", err)
		}
		return
	}
	b, w := s.newBucket(t)
	for i := range 5 {
		Put(t, w, fmt.Sprintf("k%d", i), []byte("x"))
	}
	stop := errors.New("stop here")
	calls := 0
	err := b.List(t.Context(), "", func(storage.ObjectInfo) error {
		calls++
		if calls == 2 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || calls != 2 {
		t.Errorf("List returned %v after %d calls; want the callback's error after 2", err, calls)
	}
}

func (s *suite) testListPagination(t *testing.T) {
	s.listing(t)
	b, w := s.newBucket(t)
	n := s.opts.ManyObjects
	want := make([]string, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range n {
		want[i] = fmt.Sprintf("many/%05d", i)
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			Put(t, w, want[i], []byte{byte(i)})
		}()
	}
	wg.Wait()
	Put(t, w, "other", []byte("x"))
	if diff := cmp.Diff(want, ListKeys(t, b, "many/")); diff != "" {
		t.Errorf("List(many/) mismatch (-want +got):\n%s", diff)
	}
	if got := len(ListKeys(t, b, "")); got != n+1 {
		t.Errorf("List() = %d objects, want %d", got, n+1)
	}
}

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

func (s *suite) testUpload(t *testing.T) {
	s.writable(t)
	b, _ := s.newBucket(t)
	data := Pattern(10, 3<<20+17)
	if err := storage.Upload(t.Context(), b, "up/large", bytes.NewReader(data), int64(len(data)), &storage.WriteOptions{PartSize: 5 << 20}); err != nil {
		t.Fatal(err)
	}
	if got := Get(t, b, "up/large"); !bytes.Equal(got, data) {
		t.Errorf("uploaded %d bytes, read back %d (equal: false)", len(data), len(got))
	}
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, data[:1000], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := storage.UploadFile(t.Context(), b, "up/file", path, nil); err != nil {
		t.Fatal(err)
	}
	if got := Get(t, b, "up/file"); !bytes.Equal(got, data[:1000]) {
		t.Error("UploadFile: wrong content")
	}
}

func (s *suite) testDownload(t *testing.T) {
	b, w := s.newBucket(t)
	ctx := t.Context()
	data := Pattern(11, 300_001)
	Put(t, w, "dl/obj", data)
	Put(t, w, "dl/empty", nil)
	dir := t.TempDir()
	tests := []struct {
		name string
		key  string
		opts *storage.DownloadOptions
		want []byte
	}{
		{"defaults", "dl/obj", nil, data},
		{"parallel parts", "dl/obj", &storage.DownloadOptions{PartSize: 4096, Concurrency: 8}, data},
		{"uneven parts with known size", "dl/obj", &storage.DownloadOptions{PartSize: 100_000, Size: int64(len(data))}, data},
		{"one part per byte range of one", "dl/obj", &storage.DownloadOptions{PartSize: 300_000, Concurrency: 2}, data},
		{"empty object", "dl/empty", nil, []byte{}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := filepath.Join(dir, fmt.Sprintf("out%d", i))
			var total int64
			var mu sync.Mutex
			o := storage.DownloadOptions{}
			if tt.opts != nil {
				o = *tt.opts
			}
			o.Progress = func(n int64) { mu.Lock(); total += n; mu.Unlock() }
			n, err := storage.Download(ctx, b, tt.key, dst, &o)
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(dst)
			if err != nil {
				t.Fatal(err)
			}
			if n != int64(len(tt.want)) || !bytes.Equal(got, tt.want) {
				t.Errorf("Download = %d bytes (file %d), want %d; equal %v", n, len(got), len(tt.want), bytes.Equal(got, tt.want))
			}
			if total != int64(len(tt.want)) {
				t.Errorf("progress reported %d bytes, want %d", total, len(tt.want))
			}
		})
	}
	assertNoTemp(t, dir)
}

func (s *suite) testDownloadAtomic(t *testing.T) {
	b, w := s.newBucket(t)
	ctx := t.Context()
	data := Pattern(12, 50_000)
	Put(t, w, "obj", data)
	dir := t.TempDir()
	dst := filepath.Join(dir, "dst")
	if err := os.WriteFile(dst, []byte("previous"), 0o644); err != nil {
		t.Fatal(err)
	}
	failures := []struct {
		name string
		key  string
		opts *storage.DownloadOptions
		want error
	}{
		{"missing object", "nope", nil, storage.ErrNotExist},
		{"object shorter than expected", "obj", &storage.DownloadOptions{Size: int64(len(data)) + 1}, nil},
		{"object longer than expected", "obj", &storage.DownloadOptions{Size: int64(len(data)) - 1}, nil},
		{"longer than expected, in parts", "obj", &storage.DownloadOptions{Size: 20_000, PartSize: 8192}, nil},
		{"shorter than expected, in parts", "obj", &storage.DownloadOptions{Size: 70_000, PartSize: 8192}, nil},
		{"cancelled", "obj", nil, context.Canceled},
	}
	for _, tt := range failures {
		t.Run(tt.name, func(t *testing.T) {
			ctx := ctx
			if tt.want == context.Canceled {
				c, cancel := context.WithCancel(ctx)
				cancel()
				ctx = c
			}
			if _, err := storage.Download(ctx, b, tt.key, dst, tt.opts); err == nil {
				t.Fatal("Download succeeded")
			} else if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("Download = %v, want %v", err, tt.want)
			} else if !strings.Contains(err.Error(), tt.key) {
				t.Errorf("error %q does not name the object", err)
			}
			if got, err := os.ReadFile(dst); err != nil || string(got) != "previous" {
				t.Errorf("destination changed to %q (%v) by a failed download", got, err)
			}
			assertNoTemp(t, dir)
		})
	}
	// Downloads racing to one destination leave one whole copy.
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if _, err := storage.Download(ctx, b, "obj", filepath.Join(dir, "raced"), &storage.DownloadOptions{PartSize: 8192}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got, _ := os.ReadFile(filepath.Join(dir, "raced")); !bytes.Equal(got, data) {
		t.Error("racing downloads left a mixed file")
	}
	if _, err := storage.Download(ctx, b, "obj", filepath.Join(dir, "no-such-dir", "x"), nil); err == nil {
		t.Error("Download into a missing directory succeeded")
	}
	if _, err := storage.Download(ctx, b, "obj", dst, nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(dst); !bytes.Equal(got, data) {
		t.Error("Download over an existing file: wrong content")
	}
	assertNoTemp(t, dir)
}

// assertNoTemp fails t if dir holds a temporary file of the storage helpers.
func assertNoTemp(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if storage.IsTempName(e.Name()) {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}

func (s *suite) testClose(t *testing.T) {
	b, w := s.newBucket(t)
	Put(t, w, "k", []byte("x"))
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	ctx := t.Context()
	if _, err := b.Stat(ctx, "k"); !errors.Is(err, storage.ErrClosed) {
		t.Errorf("Stat after Close = %v, want ErrClosed", err)
	}
	if r, err := b.NewRangeReader(ctx, "k", 0, -1); !errors.Is(err, storage.ErrClosed) {
		if err == nil {
			r.Close()
		}
		t.Errorf("NewRangeReader after Close = %v, want ErrClosed", err)
	}
	if !s.opts.NoList {
		if err := b.List(ctx, "", func(storage.ObjectInfo) error { return nil }); !errors.Is(err, storage.ErrClosed) {
			t.Errorf("List after Close = %v, want ErrClosed", err)
		}
	}
}
