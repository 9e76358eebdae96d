package memstore_test

import (
	"testing"

	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/memstore"
	"github.com/sluicedata/sluice/storage/storagetest"
)

func TestConformance(t *testing.T) {
	storagetest.RunWith(t, func(t *testing.T) (storage.Bucket, storage.Bucket) {
		b := memstore.New(t.Name())
		t.Cleanup(func() { b.Close() })
		return b, b
	}, &storagetest.Options{ManyObjects: 1500})
}

func BenchmarkMemstore(b *testing.B) {
	bkt := memstore.New("bench")
	defer bkt.Close()
	storagetest.RunBenchmarks(b, bkt)
}
