package convert

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/sluicedata/sluice/convert/input"
	"github.com/sluicedata/sluice/format"
)

type pqMeta struct {
	Source string `parquet:"source"`
	Width  int32  `parquet:"width"`
}

// pqRecord is a row as people have them: an embedding list, a struct, a
// list of strings, nullable columns.
type pqRecord struct {
	ID      int64     `parquet:"id"`
	Emb     []float32 `parquet:"emb,list"`
	Meta    pqMeta    `parquet:"meta"`
	Tags    []string  `parquet:"tags,list"`
	Score   *float64  `parquet:"score,optional"`
	Caption *string   `parquet:"caption,optional"`
}

func pqRecords(n int) []pqRecord {
	out := make([]pqRecord, n)
	for i := range out {
		r := pqRecord{ID: int64(i), Meta: pqMeta{Source: "src" + string(rune('a'+i%5)), Width: int32(i * 2)}}
		for j := range 1 + i%4 {
			r.Emb = append(r.Emb, float32(i)+float32(j)/8)
		}
		for j := range i % 3 {
			r.Tags = append(r.Tags, strings.Repeat("t", j+1))
		}
		if i%3 == 0 { // two rows in three have a null score
			s := float64(i) / 2
			r.Score = &s
		}
		c := "caption " + string(rune('A'+i%26))
		r.Caption = &c
		out[i] = r
	}
	return out
}

// writeParquet writes rows with the Go library's writer, 100 rows per
// row group.
// pqGroupRows is the row group size of writeParquet.
var pqGroupRows int64 = 100

func writeParquet(t testing.TB, path string, rows []pqRecord) {
	t.Helper()
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[pqRecord](&buf, parquet.MaxRowsPerRowGroup(pqGroupRows))
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, buf.Bytes())
}

func float32s(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

func TestParquetNestedAndNulls(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.parquet")
	const n = 3000
	rows := pqRecords(n)
	writeParquet(t, in, rows)

	// Default policy: the first null (row 2, id 1) fails the run by name.
	_, err := runConvertErr(t, &Options{Input: in, Output: filepath.Join(dir, "err")})
	if err == nil || !strings.Contains(err.Error(), "in.parquet:2:") || !strings.Contains(err.Error(), "score") {
		t.Fatalf("null with the error policy: %v", err)
	}

	// skip-row: the rows with a null are skipped and counted; the report
	// says so.
	out := filepath.Join(dir, "skip")
	rep := runConvert(t, &Options{Input: in, Output: out, Nulls: NullsSkipRow})
	if rep.SamplesOut != n/3 || rep.Failures["null"] != 2*n/3 || rep.Nulls["score"] != 2*n/3 {
		t.Fatalf("skip-row: out %d, failures %v, nulls %v", rep.SamplesOut, rep.Failures, rep.Nulls)
	}
	var sum strings.Builder
	if err := rep.Summary(&sum); err != nil || !strings.Contains(sum.String(), "2000 of 3000 records skipped") {
		t.Fatalf("summary does not tell about the skipped rows:\n%s", sum.String())
	}
	// A gate on the record success rate fails the run.
	if _, err := runConvertErr(t, &Options{Input: in, Output: filepath.Join(dir, "gated"), Nulls: NullsSkipRow, MinSuccessRate: 0.5}); err == nil {
		t.Fatal("keeping a third of the records passed a 50% gate")
	}
	// skip-invalid alone does not make nulls disappear silently either.
	repInv := runConvert(t, &Options{Input: in, Output: filepath.Join(dir, "inv"), SkipInvalid: true})
	if repInv.Failures["invalid"] != 2*n/3 || repInv.Passed && repInv.RecordSuccessRate > 0.34 {
		t.Fatalf("skip-invalid: failures %v, record success %v", repInv.Failures, repInv.RecordSuccessRate)
	}

	// default: every row, null scores as 0; the values come back.
	out = filepath.Join(dir, "default")
	rep = runConvert(t, &Options{Input: in, Output: out, Nulls: NullsDefault})
	encs := map[string]string{}
	for _, c := range rep.Columns {
		encs[c.Name] = c.Encoding
	}
	want := map[string]string{"id": "int", "emb": "ndarray:float32", "meta": "json", "tags": "json", "score": "float64", "caption": "str"}
	for k, v := range want {
		if encs[k] != v {
			t.Errorf("column %s: encoding %q, want %q", k, encs[k], v)
		}
	}
	got := readDataset(t, out)
	if len(got) != n {
		t.Fatalf("read %d samples, want %d", len(got), n)
	}
	for i, s := range got {
		r := rows[i]
		if s["id"] != r.ID || s["caption"] != *r.Caption {
			t.Fatalf("sample %d: id %v caption %v", i, s["id"], s["caption"])
		}
		wantScore := 0.0
		if r.Score != nil {
			wantScore = *r.Score
		}
		if s["score"] != wantScore {
			t.Fatalf("sample %d: score %v, want %v", i, s["score"], wantScore)
		}
		a, ok := s["emb"].(*format.NDArray)
		if !ok || a.DType != "float32" || len(a.Shape) != 1 || a.Shape[0] != len(r.Emb) {
			t.Fatalf("sample %d: emb %#v", i, s["emb"])
		}
		for j, f := range float32s(a.Data) {
			if f != r.Emb[j] {
				t.Fatalf("sample %d: emb %v, want %v", i, float32s(a.Data), r.Emb)
			}
		}
		mj := jsonText(t, s["meta"])
		wj, _ := json.Marshal(map[string]any{"source": r.Meta.Source, "width": r.Meta.Width})
		if string(mj) != string(wj) {
			t.Fatalf("sample %d: meta %s, want %s", i, mj, wj)
		}
		tj := jsonText(t, s["tags"])
		wt := r.Tags
		if wt == nil {
			wt = []string{}
		}
		wtj, _ := json.Marshal(wt)
		if string(tj) != string(wtj) {
			t.Fatalf("sample %d: tags %s, want %s", i, tj, wtj)
		}
	}
}

// jsonText re-marshals a decoded json column (its text, normalised).
func jsonText(t *testing.T, v any) string {
	t.Helper()
	j, ok := v.(format.JSON)
	if !ok {
		t.Fatalf("json column decoded to %T", v)
	}
	var x any
	if err := json.Unmarshal(j, &x); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(x)
	return string(b)
}

// TestParquetUnreadColumns: columns left out of --columns are not read at
// all; a corrupt excluded column does not matter.
func TestParquetUnreadColumns(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.parquet")
	writeParquet(t, in, pqRecords(300))
	raw, err := os.ReadFile(in)
	if err != nil {
		t.Fatal(err)
	}
	pf, err := parquet.OpenFile(bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		t.Fatal(err)
	}
	// Overwrite the pages of the "tags" column in every row group.
	tagsLeaf := -1
	for i, p := range pf.Schema().Columns() {
		if p[0] == "tags" {
			tagsLeaf = i
		}
	}
	for _, rg := range pf.Metadata().RowGroups {
		m := rg.Columns[tagsLeaf].MetaData
		for j := m.DataPageOffset; j < m.DataPageOffset+m.TotalCompressedSize; j++ {
			raw[j] = 0xA5
		}
	}
	bad := filepath.Join(dir, "bad.parquet")
	writeFile(t, bad, raw)
	cols := []input.Column{{Name: "id"}, {Name: "emb"}, {Name: "meta"}}
	rep := runConvert(t, &Options{Input: bad, Output: filepath.Join(dir, "ok"), Columns: cols})
	if rep.SamplesOut != 300 {
		t.Fatalf("wrote %d samples", rep.SamplesOut)
	}
	if _, err := runConvertErr(t, &Options{Input: bad, Output: filepath.Join(dir, "all"), Nulls: NullsDefault}); err == nil {
		t.Fatal("the corrupt column was read without an error")
	}
}

type pqOptRow struct {
	ID   int64   `parquet:"id"`
	Meta *pqMeta `parquet:"meta,optional"`
	Bin  []byte  `parquet:"bin"`
}

// TestParquetOptionalStruct: a null struct is null, a present one its
// fields, rendered without the library's per-row reconstruction.
func TestParquetOptionalStruct(t *testing.T) {
	dir := t.TempDir()
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[pqOptRow](&buf)
	rows := []pqOptRow{{ID: 1, Meta: &pqMeta{Source: "a\"b\u00e9", Width: -3}, Bin: []byte{0, 1}}, {ID: 2, Bin: []byte("x")}}
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(dir, "o.parquet")
	writeFile(t, in, buf.Bytes())
	out := filepath.Join(dir, "out")
	runConvert(t, &Options{Input: in, Output: out})
	got := readDataset(t, out)
	if m := jsonText(t, got[0]["meta"]); m != `{"source":"a\"bé","width":-3}` {
		t.Fatalf("meta %s", m)
	}
	if m := jsonText(t, got[1]["meta"]); m != "null" {
		t.Fatalf("null meta %s", m)
	}
	if !bytes.Equal(got[0]["bin"].([]byte), []byte{0, 1}) {
		t.Fatalf("bin %v", got[0]["bin"])
	}
}
