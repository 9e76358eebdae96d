package s3store_test

import (
	"context"
	"io"
	"testing"

	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/stack"
	"github.com/sluicedata/sluice/storage/storagetest"
)

// TestReaderInfoMatchesStat: a read of a whole object tells, through the
// standard decorators (limit, retry), what Stat reports of it (size, ETag,
// time), so that a caller needs no second request; a ranged read tells
// nothing.
func TestReaderInfoMatchesStat(t *testing.T) {
	s := testServer(t)
	raw := newBucket(t, s)
	b, err := stack.Wrap(raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	data := storagetest.Pattern(7, 3<<10)
	storagetest.Put(t, raw, "index.json", data)
	want, err := b.Stat(ctx, "index.json")
	if err != nil {
		t.Fatal(err)
	}
	got, info, ok, err := storage.ReadAllInfo(ctx, b, "index.json", 1<<20)
	if err != nil || len(got) != len(data) {
		t.Fatalf("ReadAllInfo: %d bytes, %v", len(got), err)
	}
	if !ok {
		t.Fatal("ReadAllInfo of a whole S3 object through the stack: no info")
	}
	if info.Size != want.Size || info.ETag != want.ETag || !info.ModTime.Equal(want.ModTime) || info.Key != want.Key {
		t.Fatalf("info from the GET %+v, Stat %+v", info, want)
	}
	r, err := b.NewRangeReader(ctx, "index.json", 10, 100)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, r)
	r.Close()
	if info, ok := storage.ReaderInfo(r); ok {
		t.Fatalf("a ranged read tells %+v", info)
	}
}
