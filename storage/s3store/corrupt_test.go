package s3store_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/storagetest"
)

// TestCorruptBodyNeverDelivered: a GET whose body is damaged in transit
// (one byte inverted, its length and the connection intact) never reaches
// the caller as the object. The store's checksum (CRC64-NVME, which S3
// and versitygw keep for objects uploaded without one) catches it when
// the body ends, and the retry decorator fails the read instead of
// resuming after the damaged bytes (it used to: the SDK's mismatch looked
// like a transport error, the read resumed at the end, and the damaged
// body was returned with no error). Read again, the object is whole.
func TestCorruptBodyNeverDelivered(t *testing.T) {
	const size = 1<<20 + 777
	data := storagetest.Pattern(7, size)
	isGet := func(r *http.Request) bool { return r.Method == http.MethodGet && !r.URL.Query().Has("list-type") }
	for _, off := range []int64{0, 300_000, size - 1} {
		rig := newFaultRig(t, 10)
		storagetest.Put(t, rig.direct, "shard.mds", data)
		rig.proxy.Inject(storagetest.ProxyFault{Kind: storagetest.Corrupt, Match: isGet, AfterBytes: off, Times: 1})
		r, err := rig.rb.NewRangeReader(t.Context(), "shard.mds", 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(r)
		r.Close()
		if rig.proxy.Injected(storagetest.Corrupt) != 1 {
			t.Fatalf("byte %d: the proxy damaged %d bodies, want 1", off, rig.proxy.Injected(storagetest.Corrupt))
		}
		if !errors.Is(err, storage.ErrChecksum) {
			t.Fatalf("byte %d damaged: read %d bytes (equal: %v) with error %v, want storage.ErrChecksum", off, len(got), bytes.Equal(got, data), err)
		}
		if !strings.Contains(err.Error(), "shard.mds") {
			t.Errorf("error %q does not name the object", err)
		}
		// storage.ReadAll reads a damaged body again from its start.
		rig.proxy.Inject(storagetest.ProxyFault{Kind: storagetest.Corrupt, Match: isGet, AfterBytes: off, Times: 2})
		got, err = storage.ReadAll(t.Context(), rig.rb, "shard.mds", 1<<30)
		if err != nil || !bytes.Equal(got, data) || rig.proxy.Injected(storagetest.Corrupt) != 3 {
			t.Fatalf("ReadAll through 2 damaged bodies: %d bytes (equal: %v), %v; %d damaged", len(got), bytes.Equal(got, data), err,
				rig.proxy.Injected(storagetest.Corrupt))
		}
	}
}

// TestCorruptBodyUncheckedWhenTurnedOff: a user who turns response
// validation off (the SDK's AWS_RESPONSE_CHECKSUM_VALIDATION=when_required)
// gets no check, and no checksum is asked of the store.
func TestCorruptBodyUncheckedWhenTurnedOff(t *testing.T) {
	t.Setenv("AWS_RESPONSE_CHECKSUM_VALIDATION", "when_required")
	data := storagetest.Pattern(8, 64<<10)
	rig := newFaultRig(t, 10)
	storagetest.Put(t, rig.direct, "shard.mds", data)
	asked := 0
	rig.proxy.Inject(storagetest.ProxyFault{Kind: storagetest.Corrupt, AfterBytes: 10, Times: 1, Match: func(r *http.Request) bool {
		if r.Header.Get("X-Amz-Checksum-Mode") != "" {
			asked++
		}
		return r.Method == http.MethodGet
	}})
	got, err := storage.ReadAll(t.Context(), rig.rb, "shard.mds", 1<<30)
	if err != nil || len(got) != len(data) || asked != 0 {
		t.Fatalf("read %d bytes, %v; checksums asked %d times, want none", len(got), err, asked)
	}
}

// TestDownloadThroughCorruptBodies: storage.Download of an object read
// whole (`sluice cp`'s path for objects up to a part) through two damaged
// bodies reads it again and writes the object byte-exact.
func TestDownloadThroughCorruptBodies(t *testing.T) {
	data := storagetest.Pattern(9, 512<<10+3)
	rig := newFaultRig(t, 10)
	storagetest.Put(t, rig.direct, "shard.mds", data)
	rig.proxy.Inject(storagetest.ProxyFault{Kind: storagetest.Corrupt, AfterBytes: 4096, Times: 2,
		Match: func(r *http.Request) bool { return r.Method == http.MethodGet }})
	dst := filepath.Join(t.TempDir(), "shard.mds")
	if _, err := storage.Download(t.Context(), rig.rb, "shard.mds", dst, &storage.DownloadOptions{Concurrency: 1}); err != nil {
		t.Fatalf("Download: %v", err)
	}
	got, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) || rig.proxy.Injected(storagetest.Corrupt) != 2 {
		t.Fatalf("downloaded %d bytes (equal: %v) through %d damaged bodies", len(got), bytes.Equal(got, data), rig.proxy.Injected(storagetest.Corrupt))
	}
}
