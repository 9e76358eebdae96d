package storage_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/mds"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/memstore"
	"github.com/sluicedata/sluice/storage/storagetest"
)

// TestPublisherWithMDSWriter writes a dataset with the MDS writer straight
// to a store: shards are uploaded as they are finished, index.json last,
// and the local staging copies are removed (keep_local=False).
func TestPublisherWithMDSWriter(t *testing.T) {
	out := memstore.New("out")
	rec := &recorder{Bucket: out}
	staging := t.TempDir()
	pub := storage.NewPublisher(t.Context(), rec, &storage.PublishOptions{Prefix: "ds/", RemoveLocal: true})
	w, err := mds.NewWriter(staging, &mds.WriterOptions{
		Columns:    map[string]string{"id": "int", "text": "str"},
		SizeLimit:  4 << 10,
		OnFileDone: pub.OnFileDone,
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 500 {
		if err := w.Write(format.Sample{"id": i, "text": fmt.Sprintf("sample %d of the dataset", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	if err := pub.Wait(); err != nil {
		t.Fatal(err)
	}

	order := rec.written()
	if len(order) < 3 || order[len(order)-1] != "ds/index.json" {
		t.Fatalf("upload order %v: want several shards, index.json last", order)
	}
	var idx struct {
		Shards []struct {
			RawData struct {
				Basename string `json:"basename"`
				Bytes    int64  `json:"bytes"`
			} `json:"raw_data"`
		} `json:"shards"`
	}
	if err := json.Unmarshal(storagetest.Get(t, out, "ds/index.json"), &idx); err != nil {
		t.Fatal(err)
	}
	if len(idx.Shards) != len(order)-1 {
		t.Errorf("index names %d shards, %d were uploaded", len(idx.Shards), len(order)-1)
	}
	for _, sh := range idx.Shards {
		info, err := out.Stat(t.Context(), "ds/"+sh.RawData.Basename)
		if err != nil || info.Size != sh.RawData.Bytes {
			t.Errorf("shard %s: %+v, %v; index says %d bytes", sh.RawData.Basename, info, err, sh.RawData.Bytes)
		}
		if _, err := os.Stat(filepath.Join(staging, sh.RawData.Basename)); !os.IsNotExist(err) {
			t.Errorf("local copy of %s kept: %v", sh.RawData.Basename, err)
		}
	}
}
