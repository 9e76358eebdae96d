package stream_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sluicedata/sluice/cache"
	"github.com/sluicedata/sluice/stream"
)

func TestGetRemote(t *testing.T) {
	for _, comp := range []string{"", "zstd"} {
		t.Run("compression="+comp, func(t *testing.T) {
			ctx := context.Background()
			reg, cb := memDataset(t, spec{samples: 300, payload: 100, sizeLimit: 4000, compression: comp, hashes: []string{"xxh64"}})
			ds, err := stream.Open(ctx, &stream.Options{Remote: "mem://data", Local: t.TempDir(), Registry: reg, ValidateHash: "xxh64"})
			if err != nil {
				t.Fatal(err)
			}
			defer ds.Close()
			if ds.Len() != 300 {
				t.Fatalf("Len = %d, want 300", ds.Len())
			}
			for i := int64(299); i >= 0; i -= 7 {
				s, err := ds.Get(ctx, i)
				if err != nil {
					t.Fatal(err)
				}
				if id := sampleID(t, s); id != i {
					t.Fatalf("Get(%d) returned sample %d", i, id)
				}
				if !bytes.Equal(s["data"].([]byte), payload(int(i), 100)) {
					t.Fatalf("Get(%d): wrong payload", i)
				}
			}
			s, err := ds.Get(ctx, -1)
			if err != nil || sampleID(t, s) != 299 {
				t.Fatalf("Get(-1) = %v, %v", s, err)
			}
			for k, n := range cb.counts() {
				if n != 1 && k != "index.json" {
					t.Errorf("%s downloaded %d times", k, n)
				}
			}
		})
	}
}

func TestOpenLimitTooSmall(t *testing.T) {
	ctx := context.Background()
	reg, _ := memDataset(t, spec{samples: 100, payload: 100, sizeLimit: 4000})
	_, err := stream.Open(ctx, &stream.Options{Remote: "mem://data", Local: t.TempDir(), Registry: reg, CacheLimit: 5000})
	var le *cache.LimitError
	if !errors.As(err, &le) {
		t.Fatalf("Open with a 5000-byte limit = %v, want a LimitError", err)
	}
	if le.Min <= 5000 || !strings.Contains(err.Error(), "at least") {
		t.Fatalf("error %q does not give a workable minimum", err)
	}
	// The minimum it names works.
	ds, err := stream.Open(ctx, &stream.Options{Remote: "mem://data", Local: t.TempDir(), Registry: reg, CacheLimit: le.Min})
	if err != nil {
		t.Fatalf("Open with the named minimum %d: %v", le.Min, err)
	}
	for i := range ds.Len() {
		if _, err := ds.Get(ctx, i); err != nil {
			t.Fatal(err)
		}
	}
	ds.Close()
}
