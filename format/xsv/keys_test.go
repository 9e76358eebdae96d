package xsv_test

import (
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/jsonl"
	"github.com/sluicedata/sluice/format/xsv"
)

// TestIndexKeySets checks that every shard entry and file description in
// the written index.json has exactly the keys MosaicML's readers take
// (spec 2.6), for each split format, with and without compression.
func TestIndexKeySets(t *testing.T) {
	csv := []string{"column_encodings", "column_names", "compression", "format", "hashes", "newline", "raw_data", "raw_meta", "samples", "size_limit", "version", "zip_data", "zip_meta"}
	want := map[string][]string{
		"json": {"columns", "compression", "format", "hashes", "newline", "raw_data", "raw_meta", "samples", "size_limit", "version", "zip_data", "zip_meta"},
		"csv":  csv, "tsv": csv,
		"xsv": slices.Sorted(slices.Values(append(slices.Clone(csv), "separator"))),
	}
	cols := map[string]string{"a": "int"}
	for name, keys := range want {
		for _, codec := range []string{"", "snappy"} {
			dir := t.TempDir()
			var err error
			if name == "json" {
				var w *jsonl.Writer
				if w, err = jsonl.NewWriter(dir, &jsonl.WriterOptions{Columns: cols, Compression: codec}); err == nil {
					w.Write(format.Sample{"a": 1})
					err = w.Finish()
				}
			} else {
				var w *xsv.Writer
				if w, err = xsv.NewWriter(dir, &xsv.WriterOptions{Format: name, Separator: map[string]string{"xsv": "\x01"}[name], Columns: cols, Compression: codec}); err == nil {
					w.Write(format.Sample{"a": 1})
					err = w.Finish()
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(filepath.Join(dir, "index.json"))
			if err != nil {
				t.Fatal(err)
			}
			v, err := format.ParseJSON(b)
			if err != nil {
				t.Fatal(err)
			}
			top := v.(*format.JSONObject)
			if diff := cmp.Diff([]string{"shards", "version"}, top.Keys); diff != "" {
				t.Errorf("%s: top-level keys (-want +got):\n%s", name, diff)
			}
			entry := top.Values["shards"].([]any)[0].(*format.JSONObject)
			if diff := cmp.Diff(keys, entry.Keys); diff != "" {
				t.Errorf("%s %q: entry keys (-want +got):\n%s", name, codec, diff)
			}
			for _, f := range []string{"raw_data", "raw_meta", "zip_data", "zip_meta"} {
				fi, ok := entry.Values[f].(*format.JSONObject)
				if !ok {
					if codec != "" || entry.Values[f] != nil {
						t.Errorf("%s %q: %s = %v", name, codec, f, entry.Values[f])
					}
					continue
				}
				if diff := cmp.Diff([]string{"basename", "bytes", "hashes"}, fi.Keys); diff != "" {
					t.Errorf("%s %q: %s keys (-want +got):\n%s", name, codec, f, diff)
				}
			}
		}
	}
}

// TestConcurrentReads decodes every sample from many goroutines at once
// (run with -race).
func TestConcurrentReads(t *testing.T) {
	data, meta, info := shardBytes(t)
	sh, err := xsv.OpenBytes(data, meta, info)
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 100 {
				if _, err := sh.Sample((g + j) % sh.Len()); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}
