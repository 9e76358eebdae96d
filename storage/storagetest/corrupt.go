package storagetest

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/filestore"
)

// RangedDownloadThroughCorruption checks, for a store that keeps a
// whole-object CRC (S3's CRC64-NVME or CRC32s, GCS's CRC32C), that an
// object downloaded as parallel ranges (storage.Download above its
// PartSize: `sluice cp` of a large shard) is checked against it: a range
// whose body is damaged in transit (one byte inverted, its length and the
// connection intact), which no per-response checksum covers, makes the
// download read the object again, and the file is byte-exact; a range
// damaged on every read fails the download with storage.ErrChecksum, and
// no file is left. direct writes the object; viaProxy reads it through
// proxy.
func RangedDownloadThroughCorruption(t *testing.T, direct, viaProxy storage.Bucket, proxy *FaultProxy) {
	t.Helper()
	const size, part = 3<<20 + 1234, 512 << 10
	data := Pattern(31, size)
	Put(t, direct, "big.mds", data)
	info, err := viaProxy.Stat(t.Context(), "big.mds")
	if err != nil {
		t.Fatal(err)
	}
	if storage.NewRangeCheck(info.Checksum, size) == nil {
		t.Fatalf("Stat reports checksum %v: nothing that ranges can be checked against", info.Checksum)
	}
	// The range that starts at 1 MiB, damaged 100 KB in.
	second := func(r *http.Request) bool {
		return r.Method == http.MethodGet && strings.HasPrefix(r.Header.Get("Range"), "bytes=1048576-")
	}
	opts := &storage.DownloadOptions{PartSize: part, Concurrency: 4}
	dst := filepath.Join(t.TempDir(), "big.mds")
	proxy.Inject(ProxyFault{Kind: Corrupt, Match: second, AfterBytes: 100_000, Times: 2})
	if _, err := storage.Download(t.Context(), viaProxy, "big.mds", dst, opts); err != nil {
		t.Fatalf("Download through 2 damaged ranges: %v", err)
	}
	got, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	if n := proxy.Injected(Corrupt); n != 2 || !bytes.Equal(got, data) {
		t.Fatalf("Download through %d damaged ranges: %d bytes, equal to the object: %v", n, len(got), bytes.Equal(got, data))
	}
	proxy.Clear()

	// A range whose body breaks midway is resumed below the check (the
	// retry decorator): its bytes are summed once each, so the object
	// verifies on its first read: the ranges, the Stat and the resumed
	// GET, no second read.
	dst1 := filepath.Join(t.TempDir(), "big.mds")
	proxy.Inject(ProxyFault{Kind: Reset, Match: second, AfterBytes: 100_000, Times: 1})
	before, resets := proxy.Requests(), proxy.Injected(Reset)
	_, err = storage.Download(t.Context(), viaProxy, "big.mds", dst1, opts)
	proxy.Clear()
	ranges := (size + part - 1) / part
	if got, _ := os.ReadFile(dst1); err != nil || !bytes.Equal(got, data) || proxy.Injected(Reset) != resets+1 ||
		proxy.Requests()-before != ranges+2 {
		t.Fatalf("Download through a resumed range: %v, equal %v; %d requests, want %d ranges, a Stat and a resume",
			err, bytes.Equal(got, data), proxy.Requests()-before, ranges)
	}

	dst2 := filepath.Join(t.TempDir(), "big.mds")
	proxy.Inject(ProxyFault{Kind: Corrupt, Match: second, AfterBytes: 10, Times: 1000})
	_, err = storage.Download(t.Context(), viaProxy, "big.mds", dst2, opts)
	proxy.Clear()
	if !errors.Is(err, storage.ErrChecksum) || !strings.Contains(err.Error(), "big.mds") || !strings.Contains(err.Error(), "checksum did not change") {
		t.Fatalf("Download with a range damaged on every read: %v, want storage.ErrChecksum naming big.mds, saying the store's checksum did not change", err)
	}
	if _, err := os.Stat(dst2); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a failed download left %s (%v)", dst2, err)
	}
	assertNoTemp(t, filepath.Dir(dst2))
}

// ResumedBodyThroughCorruption checks, for a store whose whole-object
// reads are checked against its checksum, that a read the retry
// decorator resumes is still checked: the body of the whole-object GET
// breaks (Reset) after breakAt bytes, the read resumes with a ranged GET
// for the rest, and that response is damaged (one byte inverted). The
// read must fail with storage.ErrChecksum, never deliver the damaged
// bytes (it did: the ranged response carries no checksum, and the check
// of the first body was dropped with it); storage.ReadAll, reading again,
// returns the object whole. A read resumed with no damage passes.
// viaProxy is the store read through proxy, wrapped by the retry
// decorator; direct writes the object.
func ResumedBodyThroughCorruption(t *testing.T, direct, viaProxy storage.Bucket, proxy *FaultProxy) {
	t.Helper()
	const size, breakAt = 1<<20 + 777, 300_000
	data := Pattern(41, size)
	Put(t, direct, "resumed.mds", data)
	whole := func(r *http.Request) bool { return r.Method == http.MethodGet && r.Header.Get("Range") == "" }
	rest := func(r *http.Request) bool { return r.Method == http.MethodGet && r.Header.Get("Range") != "" }
	for _, damaged := range []bool{false, true} {
		proxy.Clear()
		resets, corrupts := proxy.Injected(Reset), proxy.Injected(Corrupt)
		proxy.Inject(ProxyFault{Kind: Reset, Match: whole, AfterBytes: breakAt, Times: 1})
		if damaged {
			proxy.Inject(ProxyFault{Kind: Corrupt, Match: rest, AfterBytes: 100_000, Times: 1})
		}
		r, err := viaProxy.NewRangeReader(t.Context(), "resumed.mds", 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(r)
		r.Close()
		resets, corrupts = proxy.Injected(Reset)-resets, proxy.Injected(Corrupt)-corrupts
		if resets != 1 || damaged && corrupts != 1 {
			t.Fatalf("the proxy broke %d bodies and damaged %d, want 1 and 1 (damaged: %v)", resets, corrupts, damaged)
		}
		switch {
		case !damaged && (err != nil || !bytes.Equal(got, data)):
			t.Fatalf("read resumed once: %d bytes (equal: %v), %v", len(got), bytes.Equal(got, data), err)
		case damaged && !errors.Is(err, storage.ErrChecksum):
			t.Fatalf("read resumed with a damaged rest: %d bytes (equal to the object: %v), error %v; want storage.ErrChecksum",
				len(got), bytes.Equal(got, data), err)
		case damaged && !strings.Contains(err.Error(), "resumed.mds"):
			t.Errorf("error %q does not name the object", err)
		}
	}
	proxy.Clear()
	proxy.Inject(ProxyFault{Kind: Reset, Match: whole, AfterBytes: breakAt, Times: 1},
		ProxyFault{Kind: Corrupt, Match: rest, AfterBytes: 100_000, Times: 1})
	got, err := storage.ReadAll(t.Context(), viaProxy, "resumed.mds", 1<<30)
	proxy.Clear()
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("ReadAll through a resumed, damaged read: %d bytes (equal: %v), %v", len(got), bytes.Equal(got, data), err)
	}
}

// RangedDownloadOfReplacedObject checks storage.Download of an object in
// parallel ranges when the object is replaced by another of the same size
// between the Stat that reports its checksum and the ranged GETs (a
// writer publishing a new version while a reader starts): the ranges can
// never match the old checksum, so the download must learn the new one and
// read again, giving the new object byte-exact. It used to read three
// times against the stale checksum and fail with storage.ErrChecksum, as
// if every read had been damaged. direct writes; viaProxy reads through
// proxy.
func RangedDownloadOfReplacedObject(t *testing.T, direct, viaProxy storage.Bucket, proxy *FaultProxy) {
	t.Helper()
	const size, part = 2<<20 + 99, 512 << 10
	before, after := Pattern(51, size), Pattern(52, size)
	Put(t, direct, "replaced.mds", before)
	var once sync.Once
	putErr := errors.New("not replaced")
	proxy.Inject(ProxyFault{Kind: Status, Status: http.StatusInternalServerError, Match: func(r *http.Request) bool {
		if r.Method == http.MethodGet && r.Header.Get("Range") != "" {
			// The first ranged GET: the Stat has answered. The proxy
			// holds every other request meanwhile.
			once.Do(func() {
				putErr = storage.Upload(t.Context(), direct, "replaced.mds", bytes.NewReader(after), size, nil)
			})
		}
		return false
	}})
	defer proxy.Clear()
	dst := filepath.Join(t.TempDir(), "replaced.mds")
	_, err := storage.Download(t.Context(), viaProxy, "replaced.mds", dst, &storage.DownloadOptions{PartSize: part, Concurrency: 4})
	if putErr != nil {
		t.Fatalf("replacing the object during the download: %v", putErr)
	}
	if err != nil {
		t.Fatalf("Download of an object replaced after its Stat: %v", err)
	}
	got, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, after) {
		t.Fatalf("downloaded %d bytes: the new object %v, the old %v", len(got), bytes.Equal(got, after), bytes.Equal(got, before))
	}
}

// CopyThroughCorruption checks storage.CopyTree (`sluice cp`) from a store
// whose whole-object reads are checked: a body damaged in transit is
// never written, and the object is read again, so the copy succeeds
// byte-exact through two damaged bodies; a body damaged on every read
// fails it with storage.ErrChecksum naming the object, and the object
// does not appear. It used to fail the whole copy at the first damaged
// body. direct writes; viaProxy reads through proxy.
func CopyThroughCorruption(t *testing.T, direct, viaProxy storage.Bucket, proxy *FaultProxy) {
	t.Helper()
	data := Pattern(61, 700_001)
	Put(t, direct, "cp/shard.mds", data)
	isGet := func(r *http.Request) bool {
		return r.Method == http.MethodGet && strings.Contains(r.URL.Path, "shard.mds")
	}
	for _, times := range []int{2, 1000} {
		dir := t.TempDir()
		dst, err := filestore.New(dir)
		if err != nil {
			t.Fatal(err)
		}
		damaged := proxy.Injected(Corrupt)
		proxy.Inject(ProxyFault{Kind: Corrupt, Match: isGet, AfterBytes: 5000, Times: times})
		_, err = storage.CopyTree(t.Context(), viaProxy, dst, &storage.CopyTreeOptions{SrcPrefix: "cp/",
			Objects: []storage.ObjectInfo{{Key: "cp/shard.mds", Size: int64(len(data))}}})
		proxy.Clear()
		dst.Close()
		damaged = proxy.Injected(Corrupt) - damaged
		got, rerr := os.ReadFile(filepath.Join(dir, "shard.mds"))
		if times == 2 {
			if err != nil || rerr != nil || !bytes.Equal(got, data) || damaged != 2 {
				t.Fatalf("copy through %d damaged bodies: %v; %d bytes (equal: %v), %v", damaged, err, len(got), bytes.Equal(got, data), rerr)
			}
			continue
		}
		if !errors.Is(err, storage.ErrChecksum) || !strings.Contains(err.Error(), "shard.mds") {
			t.Fatalf("copy with every body damaged: %v, want storage.ErrChecksum naming shard.mds", err)
		}
		if !errors.Is(rerr, os.ErrNotExist) {
			t.Fatalf("copy with every body damaged left %d bytes (%v)", len(got), rerr)
		}
		assertNoTemp(t, dir)
	}
}
