package cache_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicedata/sluice/cache"
	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/internal/dirsnap"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/memstore"
)

// countingBucket counts whole-object and ranged reads per key.
type countingBucket struct {
	storage.Bucket
	mu   sync.Mutex
	gets map[string]int
}

func (b *countingBucket) NewRangeReader(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if off == 0 {
		b.mu.Lock()
		b.gets[key]++
		b.mu.Unlock()
	}
	return b.Bucket.NewRangeReader(ctx, key, off, n)
}

func (b *countingBucket) count(key string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.gets[key]
}

func put(t testing.TB, b storage.Bucket, key string, data []byte) {
	t.Helper()
	w, err := b.NewWriter(context.Background(), key, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func shardBytes(i, size int) []byte {
	b := make([]byte, size)
	r := rand.New(rand.NewPCG(uint64(i), 7))
	for j := range b {
		b[j] = byte(r.Uint32())
	}
	return b
}

// makeSource builds n shards of size bytes in a memstore; with gz, the
// store holds gzip files.
func makeSource(t testing.TB, n, size int, gz bool) (*cache.Source, *countingBucket, [][]byte) {
	t.Helper()
	mb := memstore.New("src")
	cb := &countingBucket{Bucket: mb, gets: map[string]int{}}
	src := &cache.Source{Bucket: cb, Backoff: func(int) time.Duration { return time.Millisecond }}
	var datas [][]byte
	for i := range n {
		data := shardBytes(i, size)
		datas = append(datas, data)
		raw := fmt.Sprintf("shard.%05d.mds", i)
		f := cache.File{Raw: raw, RawBytes: int64(len(data))}
		if gz {
			var buf bytes.Buffer
			zw := gzip.NewWriter(&buf)
			zw.Write(data)
			zw.Close()
			f.Zip, f.ZipBytes, f.Compression = raw+".gz", int64(buf.Len()), "gz"
			put(t, mb, f.Zip, buf.Bytes())
		} else {
			put(t, mb, raw, data)
		}
		src.Shards = append(src.Shards, cache.Shard{Files: []cache.File{f}})
	}
	if gz {
		src.Decompress = func(_ string, dst io.Writer, r io.Reader, raw int64) error {
			zr, err := gzip.NewReader(r)
			if err != nil {
				return err
			}
			_, err = io.Copy(dst, zr)
			return err
		}
	}
	return src, cb, datas
}

// dirBytes returns the bytes of the files under dir, excluding the cache's
// metadata, that existed together at one instant (a plain walk could count
// a shard evicted after its stat and the file fetched in its place in a
// directory walked later: see dirsnap).
func dirBytes(t testing.TB, dir string) int64 {
	return dirsnap.Bytes(dir, ".sluice", ".part")
}

// watchLimit checks the directory size continuously until stop is called
// and reports the largest size seen.
func watchLimit(t *testing.T, dir string, limit int64) (stop func() int64) {
	var peak atomic.Int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			n := dirBytes(t, dir)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
		}
	}()
	return func() int64 {
		close(done)
		wg.Wait()
		p := peak.Load()
		if p > limit {
			t.Errorf("cache held %d bytes at some instant, over its limit %d", p, limit)
		}
		return p
	}
}

func TestAcquireFetchesOnceAndReuses(t *testing.T) {
	for _, gz := range []bool{false, true} {
		t.Run(fmt.Sprintf("gz=%v", gz), func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			c, err := cache.Open(ctx, dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			src, cb, datas := makeSource(t, 4, 10000, gz)
			d, err := c.Add(ctx, src)
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			errs := make(chan error, 64)
			for g := range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for k := range 4 {
						s := (g + k) % 4
						l, err := d.Acquire(ctx, s)
						if err != nil {
							errs <- err
							return
						}
						got, err := os.ReadFile(l.Path(0))
						if err == nil && !bytes.Equal(got, datas[s]) {
							err = fmt.Errorf("shard %d: wrong bytes", s)
						}
						l.Release()
						if err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			for i, sh := range src.Shards {
				key := sh.Files[0].Raw
				if gz {
					key = sh.Files[0].Zip
					if _, err := os.Stat(filepath.Join(dir, key)); !errors.Is(err, fs.ErrNotExist) {
						t.Errorf("shard %d: compressed file kept without KeepZip", i)
					}
				}
				if n := cb.count(key); n != 1 {
					t.Errorf("shard %d downloaded %d times, want 1", i, n)
				}
			}
			u, err := c.Usage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if want := dirBytes(t, dir); u != want {
				t.Errorf("usage counter %d, directory holds %d", u, want)
			}
			st := c.Stats()
			if st.Misses == 0 || st.Hits == 0 || st.Hits+st.Misses != 64 {
				t.Errorf("stats %+v: want 64 leases with hits and misses", st)
			}
		})
	}
}

func TestLimitEvictsAndNeverExceeds(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	const size, n = 4096, 20
	limit := int64(3 * size)
	c, err := cache.Open(ctx, dir, &cache.Options{Limit: limit})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	src, _, datas := makeSource(t, n, size, false)
	d, err := c.Add(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	stop := watchLimit(t, dir, limit)
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for range 100 {
				s := r.IntN(n)
				l, err := d.Acquire(ctx, s)
				if err != nil {
					t.Error(err)
					return
				}
				got, err := os.ReadFile(l.Path(0))
				if err != nil || !bytes.Equal(got, datas[s]) {
					t.Errorf("shard %d: %v or wrong bytes", s, err)
				}
				l.Release()
			}
		}()
	}
	wg.Wait()
	stop()
	if c.Stats().Evictions == 0 {
		t.Error("no evictions with a limit of 3 shards and 20 shards read")
	}
}

func TestLimitTooSmall(t *testing.T) {
	ctx := context.Background()
	c, err := cache.Open(ctx, t.TempDir(), &cache.Options{Limit: 5000})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	src, _, _ := makeSource(t, 3, 4096, false)
	d, err := c.Add(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	err = d.CheckLimit(1, 100)
	var le *cache.LimitError
	if !errors.As(err, &le) || !errors.Is(err, cache.ErrLimitTooSmall) {
		t.Fatalf("CheckLimit = %v, want a LimitError", err)
	}
	if le.Min != 100+2*4096 {
		t.Errorf("minimum %d, want %d", le.Min, 100+2*4096)
	}
	if !strings.Contains(err.Error(), "8292") {
		t.Errorf("message %q does not give the minimum", err)
	}
}

func TestAllLeasedWaitsThenFails(t *testing.T) {
	ctx := context.Background()
	// The wait bounds both the refused Acquire and the one after a release,
	// which must evict and fetch within it: leave room for a loaded machine.
	c, err := cache.Open(ctx, t.TempDir(), &cache.Options{Limit: 2 * 4096, WaitTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	src, _, _ := makeSource(t, 3, 4096, false)
	d, _ := c.Add(ctx, src)
	l0, err := d.Acquire(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	l1, err := d.Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.Acquire(ctx, 2)
	if !errors.Is(err, cache.ErrNoSpace) || !strings.Contains(err.Error(), "shard.00002.mds") || !strings.Contains(err.Error(), "mem://") {
		t.Fatalf("Acquire with every shard leased = %v, want ErrNoSpace naming the shard and store", err)
	}
	l0.Release()
	l2, err := d.Acquire(ctx, 2)
	if err != nil {
		t.Fatalf("after a release: %v", err)
	}
	l1.Release()
	l2.Release()
}

// Two caches on one directory stand for two processes with different
// datasets: the second evicts the first one's unleased shards rather
// than waiting, and never the leased one.
func TestEvictsAnotherProcessesDataset(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	const size = 4096
	limit := int64(4 * size)
	opts := &cache.Options{Limit: limit, WaitTimeout: 5 * time.Second}
	c1, err := cache.Open(ctx, dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	c2, err := cache.Open(ctx, dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	srcX, _, _ := makeSource(t, 4, size, false)
	srcX.Dir = "x"
	srcY, _, datasY := makeSource(t, 4, size, false)
	srcY.Dir = "y"
	x, err := c1.Add(ctx, srcX)
	if err != nil {
		t.Fatal(err)
	}
	y, err := c2.Add(ctx, srcY)
	if err != nil {
		t.Fatal(err)
	}
	stop := watchLimit(t, dir, limit)
	held, err := x.Acquire(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	for s := 1; s < 4; s++ {
		l, err := x.Acquire(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		l.Release()
	}
	for s := range 3 {
		l, err := y.Acquire(ctx, s)
		if err != nil {
			t.Fatalf("dataset y shard %d with x's shards unleased: %v", s, err)
		}
		got, _ := os.ReadFile(l.Path(0))
		if !bytes.Equal(got, datasY[s]) {
			t.Errorf("y shard %d: wrong bytes", s)
		}
		l.Release()
	}
	if _, err := os.Stat(held.Path(0)); err != nil {
		t.Errorf("x's leased shard was evicted: %v", err)
	}
	held.Release()
	stop()
	if c2.Stats().Evictions < 3 {
		t.Errorf("second cache evicted %d shards of the first one's dataset, want 3", c2.Stats().Evictions)
	}
}

// TestSizeMismatchIsCorrupt: an object whose size differs from the index
// fails the fetch with an error matching format.ErrCorrupt that names it.
func TestSizeMismatchIsCorrupt(t *testing.T) {
	ctx := context.Background()
	c, err := cache.Open(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, delta := range []int64{-1, 1} {
		src, _, _ := makeSource(t, 1, 4096, false)
		src.Dir = fmt.Sprint("d", delta)
		src.Shards[0].Files[0].RawBytes += delta
		d, err := c.Add(ctx, src)
		if err != nil {
			t.Fatal(err)
		}
		_, err = d.Acquire(ctx, 0)
		var ce *format.CorruptError
		if !errors.Is(err, format.ErrCorrupt) || !errors.As(err, &ce) || !strings.Contains(err.Error(), "mem://src/shard.00000.mds") {
			t.Fatalf("index size off by %d: %v, want format.ErrCorrupt naming the object", delta, err)
		}
	}
}
