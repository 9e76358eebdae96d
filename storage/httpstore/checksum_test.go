package httpstore_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/gcsstore"
	"github.com/sluicedata/sluice/storage/httpstore"
	"github.com/sluicedata/sluice/storage/limit"
	"github.com/sluicedata/sluice/storage/retry"
	"github.com/sluicedata/sluice/storage/storagetest"
)

// gcsPublic returns a gcsstore Bucket on the GCS emulator under a fresh
// prefix, and an httpstore Bucket (with retries) reading the same objects
// from the emulator's public URL (https://storage.googleapis.com/BUCKET/…
// on GCS) through a fault proxy.
func gcsPublic(t *testing.T) (*gcsstore.Bucket, storage.Bucket, *storagetest.FaultProxy) {
	t.Helper()
	endpoint, bucket := os.Getenv("SLUICE_TEST_GCS_ENDPOINT"), os.Getenv("SLUICE_TEST_GCS_BUCKET")
	if endpoint == "" || bucket == "" {
		if os.Getenv("SLUICE_REQUIRE_SERVICES") == "1" {
			t.Fatal("no GCS emulator (SLUICE_TEST_GCS_*), required because SLUICE_REQUIRE_SERVICES=1")
		}
		t.Skip("no GCS emulator: run under .ci/with-services.sh")
	}
	prefix := "httpstore-" + time.Now().Format("150405.000000000")
	// A client of the test's own, whose idle connections it closes (the
	// package's TestMain checks that no goroutine outlives the tests).
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	direct, err := gcsstore.New(t.Context(), bucket, prefix, &gcsstore.Options{Endpoint: endpoint, HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { direct.Close() })
	proxy, err := storagetest.NewFaultProxy(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	proxy.SetHost(strings.TrimPrefix(endpoint, "http://")) // the emulator's public URLs are routed by Host
	hb, err := httpstore.New(proxy.URL+"/"+bucket+"/"+prefix, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hb.Close() })
	// As the stack builds it: retries over the in-flight limit.
	lb, err := limit.New(hb, 64)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := retry.New(lb, &retry.Options{AttemptTimeout: 10 * time.Second,
		Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }})
	if err != nil {
		t.Fatal(err)
	}
	return direct, rb, proxy
}

// TestPublicGCSBodyChecked: a public GCS object read over plain HTTP is
// checked against the CRC32C that GCS sends for every object
// (x-goog-hash): a body damaged in transit (one byte inverted, length and
// connection intact) fails with storage.ErrChecksum instead of being
// delivered, and storage.ReadAll reads it again whole. Before, httpstore
// checked nothing.
func TestPublicGCSBodyChecked(t *testing.T) {
	direct, rb, proxy := gcsPublic(t)
	data := storagetest.Pattern(61, 1<<20+3)
	storagetest.Put(t, direct, "shard.mds", data)
	info, err := rb.Stat(t.Context(), "shard.mds")
	if err != nil || info.Checksum.Algorithm != "CRC32C" {
		t.Fatalf("Stat = %+v, %v: want GCS's CRC32C", info, err)
	}
	isGet := func(r *http.Request) bool { return r.Method == http.MethodGet }
	proxy.Inject(storagetest.ProxyFault{Kind: storagetest.Corrupt, Match: isGet, AfterBytes: 300_000, Times: 1})
	r, err := rb.NewRangeReader(t.Context(), "shard.mds", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	r.Close()
	if !errors.Is(err, storage.ErrChecksum) {
		t.Fatalf("damaged body: %d bytes (equal: %v), %v; want storage.ErrChecksum", len(got), bytes.Equal(got, data), err)
	}
	proxy.Inject(storagetest.ProxyFault{Kind: storagetest.Corrupt, Match: isGet, AfterBytes: 10, Times: 2})
	got, err = storage.ReadAll(t.Context(), rb, "shard.mds", 1<<30)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("ReadAll through 2 damaged bodies: %d bytes (equal: %v), %v", len(got), bytes.Equal(got, data), err)
	}
	if n := proxy.Injected(storagetest.Corrupt); n != 3 {
		t.Fatalf("%d bodies damaged, want 3", n)
	}
}

// TestPublicGCSRangedDownloadChecked: the same object downloaded in
// parallel ranges over HTTP is checked against the CRC32C that Stat's HEAD
// reports (storage.RangeCheck).
func TestPublicGCSRangedDownloadChecked(t *testing.T) {
	direct, rb, proxy := gcsPublic(t)
	storagetest.RangedDownloadThroughCorruption(t, direct, rb, proxy)
}

// TestPublicGCSResumedBodyChecked: a whole-object GET that breaks midway
// and is resumed with a ranged GET (the retry decorator) is checked
// against the CRC32C across both responses; before, a damaged rest was
// delivered.
func TestPublicGCSResumedBodyChecked(t *testing.T) {
	direct, rb, proxy := gcsPublic(t)
	storagetest.ResumedBodyThroughCorruption(t, direct, rb, proxy)
}

// TestPublicGCSTranscodedUnchecked: an object stored gzip-compressed with
// Content-Encoding: gzip is served decompressed (GCS's decompressive
// transcoding: httpstore asks for Accept-Encoding: identity), while
// x-goog-hash still gives the CRC32C of the stored, compressed bytes. The
// decompressed body must not be checked against it (it failed every read
// with storage.ErrChecksum), nor Stat report it for ranges.
func TestPublicGCSTranscodedUnchecked(t *testing.T) {
	direct, rb, _ := gcsPublic(t)
	plain := bytes.Repeat([]byte("a sample, compressed at rest; "), 1000)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(plain)
	zw.Close()
	// The emulator's JSON API, as the user's upload would store it.
	endpoint, bucket := os.Getenv("SLUICE_TEST_GCS_ENDPOINT"), os.Getenv("SLUICE_TEST_GCS_BUCKET")
	name := strings.TrimPrefix(direct.URL("gz.txt"), "gs://"+bucket+"/")
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	meta, _ := mw.CreatePart(textproto.MIMEHeader{"Content-Type": {"application/json"}})
	fmt.Fprintf(meta, `{"name":%q,"contentEncoding":"gzip"}`, name)
	data, _ := mw.CreatePart(textproto.MIMEHeader{"Content-Type": {"application/octet-stream"}})
	data.Write(gz.Bytes())
	mw.Close()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost,
		endpoint+"/upload/storage/v1/b/"+bucket+"/o?uploadType=multipart", &body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "multipart/related; boundary="+mw.Boundary())
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("upload: %s", resp.Status)
	}
	got, err := storage.ReadAll(t.Context(), rb, "gz.txt", 1<<20)
	if err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("read of a transcoded object: %d bytes (the decompressed object: %v), %v", len(got), bytes.Equal(got, plain), err)
	}
	info, err := rb.Stat(t.Context(), "gz.txt")
	if err != nil || !info.Checksum.IsZero() {
		t.Fatalf("Stat of a transcoded object = %+v, %v: want no checksum (it is the stored bytes')", info, err)
	}
}

// TestPublicGCSCopyChecked: `sluice cp` from public GCS URLs reads a
// damaged body again instead of failing the copy.
func TestPublicGCSCopyChecked(t *testing.T) {
	direct, rb, proxy := gcsPublic(t)
	storagetest.CopyThroughCorruption(t, direct, rb, proxy)
}

// TestChecksumHeaders: which response headers give the object's checksum.
func TestChecksumHeaders(t *testing.T) {
	for _, tt := range []struct {
		name string
		h    http.Header
		want string
	}{
		{"none", http.Header{}, "none"},
		{"gcs", http.Header{"X-Goog-Hash": {"crc32c=NT3Yvg==,md5=sZRqySSS0jR8YjW00mERhA=="}}, "CRC32C:NT3Yvg=="},
		{"gcs, two headers", http.Header{"X-Goog-Hash": {"md5=sZRqySSS0jR8YjW00mERhA==", "crc32c=NT3Yvg=="}}, "CRC32C:NT3Yvg=="},
		{"gcs md5 only (not computed)", http.Header{"X-Goog-Hash": {"md5=sZRqySSS0jR8YjW00mERhA=="}}, "none"},
		{"s3", http.Header{"X-Amz-Checksum-Crc64nvme": {"AAAAAAAAAAE="}, "X-Amz-Checksum-Type": {"FULL_OBJECT"}}, "CRC64NVME:AAAAAAAAAAE="},
		{"s3 composite", http.Header{"X-Amz-Checksum-Crc32": {"NT3Yvg==-3"}, "X-Amz-Checksum-Type": {"COMPOSITE"}}, "none"},
		{"s3 composite, no type", http.Header{"X-Amz-Checksum-Crc32": {"NT3Yvg==-3"}}, "none"},
		{"gcs transcoded", http.Header{"X-Goog-Hash": {"crc32c=NT3Yvg=="}, "X-Goog-Stored-Content-Encoding": {"gzip"}}, "none"},
		{"gcs served as stored", http.Header{"X-Goog-Hash": {"crc32c=NT3Yvg=="}, "X-Goog-Stored-Content-Encoding": {"gzip"},
			"Content-Encoding": {"gzip"}}, "CRC32C:NT3Yvg=="},
		{"gcs stored identity", http.Header{"X-Goog-Hash": {"crc32c=NT3Yvg=="}, "X-Goog-Stored-Content-Encoding": {"identity"}}, "CRC32C:NT3Yvg=="},
		{"s3 before gcs", http.Header{"X-Amz-Checksum-Crc32": {"AAAAAQ=="}, "X-Goog-Hash": {"crc32c=NT3Yvg=="}}, "CRC32:AAAAAQ=="},
	} {
		if got := httpstore.HeaderChecksum(tt.h).String(); got != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
	}
}
