package stores_test

import (
	"context"
	"slices"
	"testing"

	"github.com/sluicedata/sluice/internal/stores"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/filestore"
	"github.com/sluicedata/sluice/storage/limit"
	"github.com/sluicedata/sluice/storage/retry"
	"github.com/sluicedata/sluice/storage/storagetest"
)

func TestDefaultSchemes(t *testing.T) {
	got := stores.Default().Schemes()
	for _, want := range []string{"file", "http", "https"} {
		if !slices.Contains(got, want) {
			t.Errorf("scheme %q not registered (have %v)", want, got)
		}
	}
}

func TestOpenStacksDecorators(t *testing.T) {
	ctx := context.Background()
	r := stores.Default()
	dir := t.TempDir()

	b, err := stores.Open(ctx, r, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	rb, ok := b.(*retry.Bucket)
	if !ok {
		t.Fatalf("Open returned %T, want *retry.Bucket", b)
	}
	lb, ok := rb.Unwrap().(*limit.Bucket)
	if !ok {
		t.Fatalf("under retry: %T, want *limit.Bucket", rb.Unwrap())
	}
	if fb, ok := lb.Unwrap().(*filestore.Bucket); !ok || fb.Dir() != dir {
		t.Fatalf("under limit: %T", lb.Unwrap())
	}
	storagetest.Put(t, b, "k", []byte("x"))
	if got := storagetest.Get(t, b, "k"); string(got) != "x" {
		t.Errorf("got %q", got)
	}

	// No limit: retry sits directly on the driver; there is no way to
	// open without retries.
	plain, err := stores.Open(ctx, r, "file://"+dir, &stores.Options{MaxInFlight: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	prb, ok := plain.(*retry.Bucket)
	if !ok {
		t.Fatalf("with no limit: %T, want *retry.Bucket", plain)
	}
	if _, ok := prb.Unwrap().(*filestore.Bucket); !ok {
		t.Errorf("with no limit, under retry: %T", prb.Unwrap())
	}
	if _, err := stores.Open(ctx, r, "nope://x", nil); err == nil {
		t.Error("unknown scheme opened")
	}
	var _ storage.Bucket = plain
}

// TestRegistryOpenIsDecorated: Default's Registry never hands out a
// driver undecorated, whoever calls Open (stream, convert, the agent).
func TestRegistryOpenIsDecorated(t *testing.T) {
	ctx := context.Background()
	for _, u := range []string{t.TempDir(), "file://" + t.TempDir(), "http://127.0.0.1:1/x", "https://127.0.0.1:1/x"} {
		b, err := stores.Default().Open(ctx, u)
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		if _, ok := b.(*retry.Bucket); !ok {
			t.Errorf("%s: Registry.Open returned %T, want *retry.Bucket", u, b)
		}
		b.Close()
	}
}
