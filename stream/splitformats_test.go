package stream_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/jsonl"
	"github.com/sluicedata/sluice/format/mds"
	"github.com/sluicedata/sluice/format/xsv"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/filestore"
	"github.com/sluicedata/sluice/stream"
)

// writeMixed writes one dataset whose index mixes mds, json, csv and xsv
// shards (each written by its own writer into a subdirectory, the index
// joined as merge_index does) and returns the samples in global order.
func writeMixed(t *testing.T, dir, compression string) []format.Sample {
	t.Helper()
	cols := map[string]string{"id": "int", "text": "str"}
	type writer interface {
		Write(format.Sample) error
		Finish() error
		Shards() []format.ShardInfo
	}
	var all []format.Sample
	idx := &format.Index{Merged: true}
	for k, name := range []string{"mds", "json", "csv", "xsv"} {
		sub := filepath.Join(dir, name)
		var w writer
		var err error
		switch name {
		case "mds":
			w, err = mds.NewWriter(sub, &mds.WriterOptions{Columns: cols, Compression: compression, SizeLimit: 200})
		case "json":
			w, err = jsonl.NewWriter(sub, &jsonl.WriterOptions{Columns: cols, Compression: compression, SizeLimit: 100})
		case "csv":
			w, err = xsv.NewWriter(sub, &xsv.WriterOptions{Columns: cols, Compression: compression, SizeLimit: 50})
		case "xsv":
			w, err = xsv.NewWriter(sub, &xsv.WriterOptions{Format: xsv.XSV, Separator: "|", Columns: cols, Compression: compression, SizeLimit: 50})
		}
		if err != nil {
			t.Fatal(err)
		}
		for i := range 20 {
			s := format.Sample{"id": int64(1000*k + i), "text": fmt.Sprintf("%s sample %d", name, i)}
			if err := w.Write(s); err != nil {
				t.Fatal(err)
			}
			all = append(all, s)
		}
		if err := w.Finish(); err != nil {
			t.Fatal(err)
		}
		for _, s := range w.Shards() {
			for _, fi := range []*format.FileInfo{&s.RawData, s.ZipData, s.RawMeta, s.ZipMeta} {
				if fi != nil {
					fi.Basename = name + "/" + fi.Basename
				}
			}
			idx.Shards = append(idx.Shards, s)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, format.IndexFile), format.AppendIndex(nil, idx), 0o644); err != nil {
		t.Fatal(err)
	}
	return all
}

// TestMixedFormats reads an index mixing MDS, JSON-lines, CSV and XSV
// shards through a Dataset: local only and uncompressed, and from a
// "remote" directory with compressed shards fetched into a cache.
func TestMixedFormats(t *testing.T) {
	for _, c := range []struct {
		name, compression string
		remote            bool
	}{{"local", "", false}, {"remote zstd", "zstd", true}} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			src := t.TempDir()
			want := writeMixed(t, src, c.compression)
			opts := &stream.Options{Local: src}
			if c.remote {
				reg := &storage.Registry{}
				reg.Register("file", filestore.Open)
				opts = &stream.Options{Remote: "file://" + src, Local: t.TempDir(), Registry: reg}
			}
			d, err := stream.Open(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			if d.Len() != int64(len(want)) {
				t.Fatalf("Len %d, want %d", d.Len(), len(want))
			}
			formats := map[string]bool{}
			for k := range d.NumShards() {
				formats[d.ShardInfo(k).Format] = true
			}
			if len(formats) != 4 {
				t.Fatalf("formats %v", formats)
			}
			for i, w := range want {
				got, err := d.Get(ctx, int64(i))
				if err != nil {
					t.Fatalf("Get(%d): %v", i, err)
				}
				if diff := cmp.Diff(w, got); diff != "" {
					t.Fatalf("sample %d (-want +got):\n%s", i, diff)
				}
			}
		})
	}
}
