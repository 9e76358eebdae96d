package xsv_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/mds"
	"github.com/sluicedata/sluice/format/xsv"
)

// TestVerifyShard runs the dataset verifier (mds.Verify dispatches split
// formats to VerifyShard) over a sound and a damaged CSV dataset.
func TestVerifyShard(t *testing.T) {
	var samples []format.Sample
	for i := range 50 {
		samples = append(samples, format.Sample{"a": i, "b": float64(i) / 3})
	}
	dir := write(t, &xsv.WriterOptions{Columns: map[string]string{"a": "int", "b": "float"}, Compression: "zstd", Hashes: []string{"xxh64"}, SizeLimit: 100}, samples)
	var problems []error
	st, err := mds.Verify(context.Background(), dir, func(e error) { problems = append(problems, e) })
	if err != nil || len(problems) != 0 || st.Samples != 50 || st.Files != 2*int(st.Shards) {
		t.Fatalf("sound dataset: %+v %v %v", st, problems, err)
	}
	idx := readIndex(t, dir)
	// Damage shard 1's meta file: rewrite it (compressed) with a wrong offset.
	info := idx.Shards[1]
	if err := os.Remove(filepath.Join(dir, info.ZipMeta.Basename)); err != nil {
		t.Fatal(err)
	}
	problems = nil
	if _, err := mds.Verify(context.Background(), dir, func(e error) { problems = append(problems, e) }); err != nil {
		t.Fatal(err)
	}
	var ce *format.CorruptError
	if len(problems) != 1 || !errors.As(problems[0], &ce) || ce.Shard != 1 || ce.File != info.ZipMeta.Basename {
		t.Fatalf("problems %v", problems)
	}
}
