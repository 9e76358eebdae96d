package stream

import (
	"context"
	"math"
	"testing"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/mds"
)

// TestPredownloadDefault: an unset Predownload is MosaicML's 8·BatchSize
// unless 2·PrefetchConcurrency average shards need more; a set one is kept;
// no shard size or concurrency overflows the window.
func TestPredownloadDefault(t *testing.T) {
	for _, c := range []struct {
		o    Options
		per  int64
		want int
	}{
		{Options{BatchSize: 32}, 0, 256},
		{Options{}, 0, 64},
		{Options{BatchSize: 32}, 10, 256},   // 16 shards of 10 < 256
		{Options{BatchSize: 32}, 160, 2560}, // 16 MB shards of 100 KB
		{Options{BatchSize: 32, PrefetchConcurrency: 2}, 160, 640},
		{Options{BatchSize: 32, Predownload: 5}, 160, 5}, // the user's choice
		{Options{BatchSize: 1, PrefetchConcurrency: math.MaxInt}, math.MaxInt32, math.MaxInt32},
	} {
		o := c.o
		o.shardSamples = c.per
		if got := o.predownload(); got != c.want {
			t.Errorf("predownload(%+v, %d per shard) = %d, want %d", c.o, c.per, got, c.want)
		}
	}
}

// TestOpenSizesWindowToShards: Open records the dataset's average shard,
// so that the default window holds 2·PrefetchConcurrency shards.
func TestOpenSizesWindowToShards(t *testing.T) {
	dir := t.TempDir()
	w, err := mds.NewWriter(dir, &mds.WriterOptions{Columns: map[string]string{"id": "int", "data": "bytes"}, SizeLimit: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		if err := w.Write(format.Sample{"id": int64(i), "data": make([]byte, 4000)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	ds, err := Open(context.Background(), &Options{Local: dir, BatchSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	shards := ds.NumShards()
	if shards < 10 {
		t.Fatalf("%d shards, want at least 10 for the test", shards)
	}
	per := (200 + int64(shards) - 1) / int64(shards)
	if got, want := ds.opts.predownload(), int(16*per); got != want {
		t.Fatalf("window of %d shards of ~%d samples = %d, want %d (16 shards; 8·BatchSize is 16)", shards, per, got, want)
	}
}
