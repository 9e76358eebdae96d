package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
)

type cliPQMeta struct {
	Source string `parquet:"source"`
	Width  int32  `parquet:"width"`
}

type cliPQRow struct {
	ID    int64     `parquet:"id"`
	Emb   []float32 `parquet:"emb,list"`
	Meta  cliPQMeta `parquet:"meta"`
	Score *float64  `parquet:"score,optional"`
}

// TestConvertParquetDump: a Parquet file with list, struct and nullable
// columns, written by the Go library's writer, converts; `sluice dump`
// gives back the file's values.
func TestConvertParquetDump(t *testing.T) {
	dir := t.TempDir()
	s := 2.25
	rows := []cliPQRow{
		{ID: 7, Emb: []float32{0.5, -1.25, 3}, Meta: cliPQMeta{"web", 640}, Score: &s},
		{ID: 8, Emb: []float32{42}, Meta: cliPQMeta{"book", 0}},
	}
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[cliPQRow](&buf)
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(dir, "in.parquet")
	if err := os.WriteFile(in, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	stdout, _, err := runConvertCLI(t, "convert", in, out, "--nulls", "skip-row", "--progress", "none")
	if err != nil || !strings.Contains(stdout, "1 of 2 records skipped") || !strings.Contains(stdout, "score 1") {
		t.Fatalf("convert: %v\n%s", err, stdout)
	}
	if _, _, err := runConvertCLI(t, "convert", in, filepath.Join(dir, "all"), "--nulls", "default", "--progress", "none"); err != nil {
		t.Fatal(err)
	}
	dump, _, err := runConvertCLI(t, "dump", filepath.Join(dir, "all"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(dump), "\n")
	if len(lines) != 2 {
		t.Fatalf("dump printed %d lines:\n%s", len(lines), dump)
	}
	type col struct {
		V json.RawMessage `json:"v"`
	}
	for i, line := range lines {
		var d struct {
			Cols map[string]col `json:"cols"`
		}
		if err := json.Unmarshal([]byte(line), &d); err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		var emb struct {
			Data  []float32 `json:"data"`
			DType string    `json:"dtype"`
			Shape []int     `json:"shape"`
		}
		if err := json.Unmarshal(d.Cols["emb"].V, &emb); err != nil {
			t.Fatalf("line %d emb: %v (%s)", i, err, d.Cols["emb"].V)
		}
		if emb.DType != "float32" || len(emb.Shape) != 1 || emb.Shape[0] != len(rows[i].Emb) {
			t.Fatalf("line %d: emb %+v", i, emb)
		}
		for j := range emb.Data {
			if emb.Data[j] != rows[i].Emb[j] {
				t.Fatalf("line %d: emb %v, want %v", i, emb.Data, rows[i].Emb)
			}
		}
		var meta struct {
			JSON cliPQMeta `json:"json"` // dump shows json columns as {"json": VALUE}
		}
		if err := json.Unmarshal(d.Cols["meta"].V, &meta); err != nil {
			t.Fatalf("line %d meta: %v (%s)", i, err, d.Cols["meta"].V)
		}
		if meta.JSON != rows[i].Meta {
			t.Fatalf("line %d: meta %+v (%s), want %+v", i, meta, d.Cols["meta"].V, rows[i].Meta)
		}
		var score struct {
			S string `json:"s"` // dump shows floats as {"bits": HEX, "s": TEXT}
		}
		var id float64
		json.Unmarshal(d.Cols["score"].V, &score)
		json.Unmarshal(d.Cols["id"].V, &id)
		want := "0.0"
		if rows[i].Score != nil {
			want = "2.25"
		}
		if score.S != want || id != float64(rows[i].ID) {
			t.Fatalf("line %d: id %v score %v (%s)", i, id, score, line)
		}
	}
}
