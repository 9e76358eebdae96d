package s3store_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/sluicedata/sluice/storage/s3store"
	"github.com/sluicedata/sluice/storage/storagetest"
)

// TestCustomEndpointUploadsWithoutChecksumTrailers: through a custom
// endpoint (MinIO, Ceph, R2, versitygw...) an upload carries no checksum
// the store did not ask for (the SDK's default since 2025 is a CRC32
// trailer in an aws-chunked body, which many S3-compatible stores
// refuse), unless the user asks for one with
// AWS_REQUEST_CHECKSUM_CALCULATION=when_supported. The headers are read
// off the wire by a proxy in front of the real server.
func TestCustomEndpointUploadsWithoutChecksumTrailers(t *testing.T) {
	s := testServer(t)
	for _, tc := range []struct {
		env       string
		checksums bool
	}{{"", false}, {"when_supported", true}} {
		t.Run("env="+tc.env, func(t *testing.T) {
			t.Setenv("AWS_REQUEST_CHECKSUM_CALCULATION", tc.env)
			proxy, err := storagetest.NewFaultProxy(s.endpoint)
			if err != nil {
				t.Fatal(err)
			}
			defer proxy.Close()
			var mu sync.Mutex
			var puts []http.Header
			proxy.Inject(storagetest.ProxyFault{Kind: storagetest.Status, Match: func(r *http.Request) bool {
				if r.Method == http.MethodPut {
					mu.Lock()
					puts = append(puts, r.Header.Clone())
					mu.Unlock()
				}
				return false // observe only
			}})
			opts := s.options()
			opts.Endpoint = proxy.URL
			b, err := s3store.New(context.Background(), s.bucket, uniquePrefix(t), opts)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			storagetest.Put(t, b, "object.bin", storagetest.Pattern(3, 64<<10))
			defer b.Delete(context.Background(), "object.bin")
			mu.Lock()
			defer mu.Unlock()
			if len(puts) == 0 {
				t.Fatal("the proxy saw no PUT")
			}
			for _, h := range puts {
				got := h.Get("X-Amz-Trailer") != "" || h.Get("X-Amz-Sdk-Checksum-Algorithm") != "" ||
					strings.Contains(h.Get("Content-Encoding"), "aws-chunked") || hasChecksumHeader(h)
				if got != tc.checksums {
					t.Errorf("AWS_REQUEST_CHECKSUM_CALCULATION=%q: PUT with checksums %v, want %v (headers %v)", tc.env, got, tc.checksums, h)
				}
			}
		})
	}
}

func hasChecksumHeader(h http.Header) bool {
	for k := range h {
		if strings.HasPrefix(strings.ToLower(k), "x-amz-checksum-") {
			return true
		}
	}
	return false
}
