package stream

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/mds"
)

// TestShardInfoOnFirstUse checks that opening a dataset and reading a
// sample makes the ShardInfo of that sample's shard only (a first batch
// touches a few of 40k shards; SharedIndex made them all), and that the
// entries made on demand equal the index's.
func TestShardInfoOnFirstUse(t *testing.T) {
	dir := t.TempDir()
	w, err := mds.NewWriter(dir, &mds.WriterOptions{Columns: map[string]string{"id": "int", "text": "str"}, SizeLimit: 200})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		if err := w.Write(format.Sample{"id": int64(i), "text": fmt.Sprintf("sample %d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	d, err := Open(context.Background(), &Options{Local: dir, BatchSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.NumShards() < 20 {
		t.Fatalf("%d shards: want many", d.NumShards())
	}
	made := func() int {
		n := 0
		for i := range d.streams[0].infos {
			if d.streams[0].infos[i].Load() != nil {
				n++
			}
		}
		return n
	}
	if n := made(); n != 0 {
		t.Fatalf("Open made %d ShardInfos, want 0", n)
	}
	s, err := d.Get(context.Background(), 299)
	if err != nil || s["id"] != int64(299) {
		t.Fatalf("Get(299) = %v, %v", s, err)
	}
	if n := made(); n != 1 {
		t.Fatalf("reading one sample made %d ShardInfos, want 1", n)
	}
	b, err := os.ReadFile(filepath.Join(dir, format.IndexFile))
	if err != nil {
		t.Fatal(err)
	}
	idx, err := format.ParseIndex(b)
	if err != nil {
		t.Fatal(err)
	}
	for i := range d.NumShards() {
		got := d.ShardInfo(i)
		if !reflect.DeepEqual(*got, idx.Shards[i]) {
			t.Fatalf("shard %d: %+v, want %+v", i, *got, idx.Shards[i])
		}
		if again := d.ShardInfo(i); again != got {
			t.Fatalf("shard %d: a new ShardInfo on each call", i)
		}
		if d.ShardSamples(i) != int64(idx.Shards[i].Samples) || d.ShardBytes(i) != idx.Shards[i].RawData.Bytes {
			t.Fatalf("shard %d: samples %d bytes %d", i, d.ShardSamples(i), d.ShardBytes(i))
		}
		cfg := *d.ConfigInfo(d.ShardConfig(i))
		if cfg.Format != idx.Shards[i].Format || !reflect.DeepEqual(cfg.ColumnNames, idx.Shards[i].ColumnNames) {
			t.Fatalf("shard %d: configuration %+v", i, cfg)
		}
	}
}
