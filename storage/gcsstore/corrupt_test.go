package gcsstore_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"testing"

	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/storagetest"
)

// TestCorruptBodyNeverDelivered: a whole-object read whose body is damaged
// in transit (one byte inverted, its length intact) is caught by the
// CRC32C the store sends, reported as storage.ErrChecksum, and not resumed
// past by the retry decorator; storage.ReadAll reads it again whole.
func TestCorruptBodyNeverDelivered(t *testing.T) {
	s := testServer(t)
	direct := newBucket(t, s)
	data := storagetest.Pattern(22, 1<<20+99)
	storagetest.Put(t, direct, "shard", data)
	proxy, rb := proxiedBucket(t, s, direct, nil)
	isGet := func(r *http.Request) bool { return r.Method == http.MethodGet }
	proxy.Inject(storagetest.ProxyFault{Kind: storagetest.Corrupt, Match: isGet, AfterBytes: 200_000, Times: 1})
	r, err := rb.NewRangeReader(t.Context(), "shard", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	r.Close()
	if proxy.Injected(storagetest.Corrupt) != 1 {
		t.Fatalf("%d bodies damaged, want 1", proxy.Injected(storagetest.Corrupt))
	}
	if !errors.Is(err, storage.ErrChecksum) {
		t.Fatalf("damaged body: read %d bytes (equal: %v) with error %v, want storage.ErrChecksum", len(got), bytes.Equal(got, data), err)
	}
	proxy.Inject(storagetest.ProxyFault{Kind: storagetest.Corrupt, Match: isGet, AfterBytes: 10, Times: 1})
	got, err = storage.ReadAll(t.Context(), rb, "shard", 1<<30)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("ReadAll through a damaged body: %d bytes (equal: %v), %v", len(got), bytes.Equal(got, data), err)
	}
}
