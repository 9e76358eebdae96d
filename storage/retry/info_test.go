package retry_test

import (
	"context"
	"io"
	"testing"

	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/memstore"
	"github.com/sluicedata/sluice/storage/storagetest"
)

// infoBucket tells, with every read, what Stat says of the object (as
// s3store does for whole reads).
type infoBucket struct{ storage.Bucket }

func (b infoBucket) NewRangeReader(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	r, err := b.Bucket.NewRangeReader(ctx, key, off, length)
	if err != nil {
		return nil, err
	}
	info, err := b.Bucket.Stat(ctx, key)
	if err != nil {
		r.Close()
		return nil, err
	}
	return storage.NewBodyReaderInfo(ctx, r, "info", b.URL(key), info), nil
}

// TestReaderInfo: the retrying reader tells what its response told of
// the object, unless the read was resumed from a second request (whose
// object may be another version than the first's).
func TestReaderInfo(t *testing.T) {
	m := memstore.New("b")
	data := storagetest.Pattern(3, 5000)
	storagetest.Put(t, m, "k", data)
	f := storagetest.NewFaulty(m)
	b, _ := newRetry(t, infoBucket{f}, nil)
	got, info, ok, err := storage.ReadAllInfo(t.Context(), b, "k", 1<<20)
	if err != nil || len(got) != len(data) || !ok || info.Size != int64(len(data)) {
		t.Fatalf("clean read: %d bytes, %v, info %+v (%v)", len(got), err, info, ok)
	}
	f.Inject(storagetest.Fault{Op: storagetest.OpRead, Times: 1, AfterBytes: 1000, Err: errReset})
	got, info, ok, err = storage.ReadAllInfo(t.Context(), b, "k", 1<<20)
	if err != nil || len(got) != len(data) {
		t.Fatalf("resumed read: %d bytes, %v", len(got), err)
	}
	if ok {
		t.Fatalf("a read resumed from a second request tells %+v", info)
	}
}
