package storagetest

import (
	"bytes"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicedata/sluice/storage"
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

	dst2 := filepath.Join(t.TempDir(), "big.mds")
	proxy.Inject(ProxyFault{Kind: Corrupt, Match: second, AfterBytes: 10, Times: 1000})
	_, err = storage.Download(t.Context(), viaProxy, "big.mds", dst2, opts)
	proxy.Clear()
	if !errors.Is(err, storage.ErrChecksum) || !strings.Contains(err.Error(), "big.mds") {
		t.Fatalf("Download with a range damaged on every read: %v, want storage.ErrChecksum naming big.mds", err)
	}
	if _, err := os.Stat(dst2); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a failed download left %s (%v)", dst2, err)
	}
	assertNoTemp(t, filepath.Dir(dst2))
}
