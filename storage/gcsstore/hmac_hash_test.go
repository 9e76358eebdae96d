package gcsstore_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sluicedata/sluice/internal/s3test"
	"github.com/sluicedata/sluice/internal/stores"
	"github.com/sluicedata/sluice/storage"
)

// TestHMACGoogHashChecked reads through a proxy that answers as GCS's XML
// API does: the object's CRC32C in x-goog-hash, no x-amz-checksum-*. A
// whole-object read is checked against it: the right CRC32C reads, a
// wrong one fails with storage.ErrChecksum, and Stat reports it for the
// checks of ranged reads. Before, the XML API's reads were unchecked.
func TestHMACGoogHashChecked(t *testing.T) {
	s := s3test.Require(t)
	ctx := context.Background()
	prefix := s3test.NewPrefix("gcs-hmac-hash")
	direct := s.Open(t, prefix)
	data := bytes.Repeat([]byte("shard bytes checked by crc32c "), 1000)
	if err := storage.Upload(ctx, direct, "shard.00000.mds", bytes.NewReader(data), int64(len(data)), nil); err != nil {
		t.Fatal(err)
	}
	sum := binary.BigEndian.AppendUint32(nil, crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli)))
	var hash atomic.Value
	target, err := url.Parse(s.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.ModifyResponse = func(r *http.Response) error {
		for k := range r.Header {
			if strings.HasPrefix(strings.ToLower(k), "x-amz-checksum-") {
				r.Header.Del(k)
			}
		}
		if r.Request.Method == http.MethodGet || r.Request.Method == http.MethodHead {
			r.Header.Set("X-Goog-Hash", "crc32c="+hash.Load().(string)+",md5=1B2M2Y8AsgTpgAmY7PhCfg==")
		}
		return nil
	}
	srv := httptest.NewServer(rp)
	defer srv.Close()
	setHMACEnv(t, s.AccessKey, s.SecretKey)
	u := "gs://" + s.Bucket + "/" + prefix + "?" + url.Values{"endpoint": {srv.URL}, "region": {s.Region}}.Encode()
	b, err := stores.Open(ctx, stores.Default(), u, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	read := func() ([]byte, error) {
		r, err := b.NewRangeReader(ctx, "shard.00000.mds", 0, -1)
		if err != nil {
			return nil, err
		}
		defer r.Close()
		return io.ReadAll(r)
	}

	hash.Store(base64.StdEncoding.EncodeToString(sum))
	got, err := read()
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("with the object's CRC32C: %d bytes, %v", len(got), err)
	}
	info, err := b.Stat(ctx, "shard.00000.mds")
	if err != nil || info.Checksum.Algorithm != "CRC32C" || !bytes.Equal(info.Checksum.Value, sum) {
		t.Errorf("Stat's checksum = %+v, %v; want the CRC32C of x-goog-hash", info.Checksum, err)
	}

	bad := append([]byte(nil), sum...)
	bad[0] ^= 0xff
	hash.Store(base64.StdEncoding.EncodeToString(bad))
	if _, err := read(); !errors.Is(err, storage.ErrChecksum) {
		t.Errorf("with a wrong CRC32C in x-goog-hash: %v, want storage.ErrChecksum", err)
	}
}
