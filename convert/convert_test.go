package convert

import (
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicedata/sluice/convert/input"
	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/mds"
)

func TestJSONLInferredMatchesWriter(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	writeFile(t, in, jsonlRecords(3000))
	for _, comp := range []string{"", "zstd"} {
		t.Run("compression="+comp, func(t *testing.T) {
			out := filepath.Join(dir, "out"+comp)
			rep := runConvert(t, &Options{Input: in, Output: out, Compression: comp, Hashes: []string{"xxh64", "sha1"}, SizeLimit: 32 << 10})
			wantCols := []input.Column{{Name: "id", Encoding: "int"}, {Name: "score", Encoding: "float64"}, {Name: "tags", Encoding: "json"}, {Name: "text", Encoding: "str"}}
			if diff := cmp.Diff(wantCols, rep.Columns); diff != "" {
				t.Fatalf("columns (-want +got):\n%s", diff)
			}
			if rep.SamplesIn != 3000 || rep.SamplesOut != 3000 || rep.Shards < 2 {
				t.Fatalf("report: in %d out %d shards %d", rep.SamplesIn, rep.SamplesOut, rep.Shards)
			}
			got := readDataset(t, out)
			if len(got) != 3000 {
				t.Fatalf("read %d samples", len(got))
			}
			// The same samples written by the MDS writer give the same bytes.
			ref := filepath.Join(dir, "ref"+comp)
			w, err := mds.NewWriter(ref, &mds.WriterOptions{
				Columns:     map[string]string{"id": "int", "score": "float64", "tags": "json", "text": "str"},
				Compression: comp, Hashes: []string{"sha1", "xxh64"}, SizeLimit: 32 << 10,
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range got {
				if err := w.Write(s); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Finish(); err != nil {
				t.Fatal(err)
			}
			sameDataFiles(t, ref, out)
			if s := got[7]; s["id"] != int64(7) || s["text"] != "record number 7 with some words in it \u00e9" || s["score"] != 7.5 || string(s["tags"].(format.JSON)) != `["a", 0]` {
				t.Errorf("sample 7 = %v", s)
			}
		})
	}
}
