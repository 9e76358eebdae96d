package stream_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/mds"
	"github.com/sluicedata/sluice/plan"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/filestore"
	"github.com/sluicedata/sluice/stream"
)

// Streaming a dataset as rank 0 of 2 would: through a cache directory
// with a limit, in MosaicML's shuffled order, then the state to resume
// from.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "sluice-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	// A small dataset in a directory that plays the remote store.
	remote := filepath.Join(dir, "remote")
	w, err := mds.NewWriter(remote, &mds.WriterOptions{
		Columns: map[string]string{"id": "int", "text": "str"}, SizeLimit: 1 << 10, Compression: "zstd",
	})
	if err != nil {
		panic(err)
	}
	for i := range 100 {
		w.Write(format.Sample{"id": int64(i), "text": fmt.Sprintf("sample number %d", i)})
	}
	if err := w.Finish(); err != nil {
		panic(err)
	}

	reg := &storage.Registry{}
	reg.Register("file", filestore.Open)
	ds, err := stream.Open(ctx, &stream.Options{
		Remote: "file://" + remote, Local: filepath.Join(dir, "cache"), Registry: reg,
		BatchSize: 4, Shuffle: true, CacheLimit: 8 << 10,
	})
	if err != nil {
		panic(err)
	}
	defer ds.Close()

	ep, err := ds.NewEpoch(ctx, plan.World{Nodes: 1, RanksPerNode: 2, Rank: 0}, 1)
	if err != nil {
		panic(err)
	}
	it, err := ep.RankIter(ctx)
	if err != nil {
		panic(err)
	}
	defer it.Close()
	// One batch of this rank.
	for it.Yielded() < 4 && it.Next() {
		s, err := it.Sample()
		if err != nil {
			panic(err)
		}
		fmt.Println(it.ID(), s["text"])
	}
	st, err := ds.State(it.Yielded())
	if err != nil {
		panic(err)
	}
	b, _ := st.MarshalJSON()
	fmt.Println(string(b))
	// Output:
	// 10 sample number 10
	// 84 sample number 84
	// 23 sample number 23
	// 74 sample number 74
	// {"epoch": 0, "initial_physical_nodes": 1, "num_canonical_nodes": 1, "sample_in_epoch": 8, "shuffle_seed": 9176}
}
