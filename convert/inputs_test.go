package convert

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/parquet-go/parquet-go"

	"github.com/sluicedata/sluice/convert/input"
	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/wds"
)

func TestCSVAndTSV(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.csv"), []byte("id,name,weight,note\n1,alice,1.5,\"has, comma\"\n2,bob,2,plain\n3,carol,-0.25,x\n"))
	writeFile(t, filepath.Join(dir, "a.tsv"), []byte("id\tname\n1\talice\n2\tbob\n"))
	out := filepath.Join(dir, "csv")
	rep := runConvert(t, &Options{Input: filepath.Join(dir, "a.csv"), Output: out})
	want := []input.Column{{Name: "id", Encoding: "int"}, {Name: "name", Encoding: "str"}, {Name: "note", Encoding: "str"}, {Name: "weight", Encoding: "float64"}}
	if diff := cmp.Diff(want, rep.Columns); diff != "" {
		t.Fatalf("columns (-want +got):\n%s", diff)
	}
	got := readDataset(t, out)
	wantRows := []format.Sample{
		{"id": int64(1), "name": "alice", "weight": 1.5, "note": "has, comma"},
		{"id": int64(2), "name": "bob", "weight": 2.0, "note": "plain"},
		{"id": int64(3), "name": "carol", "weight": -0.25, "note": "x"},
	}
	if diff := cmp.Diff(wantRows, got); diff != "" {
		t.Errorf("samples (-want +got):\n%s", diff)
	}
	// Explicit columns pick and type a subset.
	out2 := filepath.Join(dir, "tsv")
	runConvert(t, &Options{Input: filepath.Join(dir, "a.tsv"), Output: out2, Columns: []input.Column{{Name: "id", Encoding: "str_int"}, {Name: "name", Encoding: "bytes"}}})
	got = readDataset(t, out2)
	if len(got) != 2 || fmt.Sprint(got[1]["id"]) != "2" || string(got[1]["name"].([]byte)) != "bob" {
		t.Errorf("tsv samples = %v", got)
	}
}

func TestCSVBadRowNamesLine(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "bad.csv"), []byte("id,name\n1,a\n2,b,extra\n"))
	_, err := runConvertErr(t, &Options{Input: filepath.Join(dir, "bad.csv"), Output: filepath.Join(dir, "out")})
	if err == nil || !strings.Contains(err.Error(), "bad.csv:3") {
		t.Fatalf("err = %v, want one naming bad.csv:3", err)
	}
}

func TestJSONLMissingAndMixedFields(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "m.jsonl")
	writeFile(t, in, []byte(`{"a": 1, "b": "x", "c": 1}
{"a": 2, "c": "two"}
{"a": 3, "b": null, "c": 3.5, "d": {"k": [1, 2]}}
`))
	out := filepath.Join(dir, "out")
	rep := runConvert(t, &Options{Input: in, Output: out})
	want := []input.Column{{Name: "a", Encoding: "int"}, {Name: "b", Encoding: "json"}, {Name: "c", Encoding: "json"}, {Name: "d", Encoding: "json"}}
	if diff := cmp.Diff(want, rep.Columns); diff != "" {
		t.Fatalf("columns (-want +got):\n%s", diff)
	}
	got := readDataset(t, out)
	wantRows := []format.Sample{
		{"a": int64(1), "b": format.JSON(`"x"`), "c": format.JSON(`1`), "d": format.JSON(`null`)},
		{"a": int64(2), "b": format.JSON(`null`), "c": format.JSON(`"two"`), "d": format.JSON(`null`)},
		{"a": int64(3), "b": format.JSON(`null`), "c": format.JSON(`3.5`), "d": format.JSON(`{"k": [1, 2]}`)},
	}
	if diff := cmp.Diff(wantRows, got); diff != "" {
		t.Errorf("samples (-want +got):\n%s", diff)
	}
}

func TestJSONLBadLineNamesLine(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "bad.jsonl"), []byte("{\"a\": 1}\n{\"a\": 2}\n{\"a\": 3,}\n"))
	_, err := runConvertErr(t, &Options{Input: filepath.Join(dir, "bad.jsonl"), Output: filepath.Join(dir, "out")})
	if err == nil || !strings.Contains(err.Error(), "bad.jsonl:3") {
		t.Fatalf("err = %v, want one naming bad.jsonl:3", err)
	}
	// With SkipInvalid the line is skipped and counted.
	rep := runConvert(t, &Options{Input: filepath.Join(dir, "bad.jsonl"), Output: filepath.Join(dir, "out2"), SkipInvalid: true})
	if rep.SamplesOut != 2 || rep.Failures["invalid"] != 1 {
		t.Fatalf("report: out %d failures %v", rep.SamplesOut, rep.Failures)
	}
}

type pqRow struct {
	ID    int64   `parquet:"id"`
	Name  string  `parquet:"name"`
	Score float64 `parquet:"score"`
	Blob  []byte  `parquet:"blob"`
	Flag  bool    `parquet:"flag"`
}

func TestParquet(t *testing.T) {
	dir := t.TempDir()
	var rows []pqRow
	for i := range 2500 {
		rows = append(rows, pqRow{ID: int64(i), Name: fmt.Sprintf("row-%d", i), Score: float64(i) / 4, Blob: []byte{byte(i), 1, 2}, Flag: i%2 == 0})
	}
	for f := range 2 {
		var buf bytes.Buffer
		w := parquet.NewGenericWriter[pqRow](&buf, parquet.MaxRowsPerRowGroup(700))
		if _, err := w.Write(rows[f*1250 : (f+1)*1250]); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, fmt.Sprintf("p-%d.parquet", f)), buf.Bytes())
	}
	out := filepath.Join(dir, "out")
	rep := runConvert(t, &Options{Input: filepath.Join(dir, "p-{0..1}.parquet"), Output: out, Compression: "zstd"})
	want := []input.Column{{Name: "blob", Encoding: "bytes"}, {Name: "flag", Encoding: "uint8"}, {Name: "id", Encoding: "int"}, {Name: "name", Encoding: "str"}, {Name: "score", Encoding: "float64"}}
	if diff := cmp.Diff(want, rep.Columns); diff != "" {
		t.Fatalf("columns (-want +got):\n%s", diff)
	}
	got := readDataset(t, out)
	if len(got) != len(rows) {
		t.Fatalf("read %d samples, want %d", len(got), len(rows))
	}
	for i, s := range got {
		r := rows[i]
		flag := uint8(0)
		if r.Flag {
			flag = 1
		}
		w := format.Sample{"id": r.ID, "name": r.Name, "score": r.Score, "blob": r.Blob, "flag": flag}
		if diff := cmp.Diff(w, s); diff != "" {
			t.Fatalf("sample %d (-want +got):\n%s", i, diff)
		}
	}
}

// makeJPEG encodes a small image whose colour depends on i.
func makeJPEG(t testing.TB, i, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.RGBA{uint8(i * 37), uint8(x), uint8(y), 255})
		}
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 80}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// makePNG encodes a small PNG.
func makePNG(t testing.TB, w, h int) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewRGBA(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestImageFolder(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "imgs")
	files := map[string][]byte{}
	for i, name := range []string{"dog/b.jpg", "dog/a.jpg", "cat/x.jpg", "cat/y.jpeg", "zebra/1.jpg"} {
		files[name] = makeJPEG(t, i, 16, 12)
		writeFile(t, filepath.Join(root, name), files[name])
	}
	writeFile(t, filepath.Join(root, "README.txt"), []byte("not an image"))
	writeFile(t, filepath.Join(root, "cat", "notes.txt"), []byte("not an image"))
	out := filepath.Join(dir, "out")
	rep := runConvert(t, &Options{Input: root, Output: out})
	if diff := cmp.Diff([]input.Column{{Name: "image", Encoding: "jpeg"}, {Name: "label", Encoding: "int"}}, rep.Columns); diff != "" {
		t.Fatalf("columns (-want +got):\n%s", diff)
	}
	got := readDataset(t, out)
	order := []string{"cat/x.jpg", "cat/y.jpeg", "dog/a.jpg", "dog/b.jpg", "zebra/1.jpg"}
	labels := []int64{0, 0, 1, 1, 2}
	if len(got) != len(order) {
		t.Fatalf("read %d samples, want %d", len(got), len(order))
	}
	for i, s := range got {
		img := s["image"].(*format.Image)
		if !bytes.Equal(img.Encoded, files[order[i]]) || s["label"] != labels[i] {
			t.Errorf("sample %d: label %v, image %d bytes; want %s label %d", i, s["label"], len(img.Encoded), order[i], labels[i])
		}
		if img.Width != 16 || img.Height != 12 {
			t.Errorf("sample %d decodes to %dx%d", i, img.Width, img.Height)
		}
	}
}

// writeTars writes n WebDataset shards of per samples each under dir and
// returns the samples in order.
func writeTars(t testing.TB, dir string, n, per int) []wds.Sample {
	t.Helper()
	var all []wds.Sample
	for k := range n {
		var buf bytes.Buffer
		w := wds.NewWriter(&buf)
		for j := range per {
			i := k*per + j
			s := wds.Sample{Key: fmt.Sprintf("s%06d", i), Fields: map[string][]byte{
				"jpg": makeJPEG(t, i, 8, 8), "cls": []byte(fmt.Sprint(i % 10)), "txt": []byte(fmt.Sprintf("caption %d", i)),
			}}
			if err := w.Write(s.Key, s.Fields); err != nil {
				t.Fatal(err)
			}
			all = append(all, s)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, fmt.Sprintf("shard-%06d.tar", k)), buf.Bytes())
	}
	return all
}

func checkTarSamples(t *testing.T, got []format.Sample, want []wds.Sample) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("read %d samples, want %d", len(got), len(want))
	}
	for i, s := range got {
		w := want[i]
		if s[input.KeyColumn] != w.Key || s["txt"] != string(w.Fields["txt"]) || fmt.Sprint(s["cls"]) != string(w.Fields["cls"]) ||
			!bytes.Equal(s["jpg"].(*format.Image).Encoded, w.Fields["jpg"]) {
			t.Fatalf("sample %d = %v, want key %s", i, s, w.Key)
		}
	}
}

func TestWebDatasetLocalAndRemote(t *testing.T) {
	dir := t.TempDir()
	tars := filepath.Join(dir, "tars")
	want := writeTars(t, tars, 3, 7)
	out := filepath.Join(dir, "local")
	rep := runConvert(t, &Options{Input: filepath.Join(tars, "shard-{000000..000002}.tar"), Output: out})
	wantCols := []input.Column{{Name: "__key__", Encoding: "str"}, {Name: "cls", Encoding: "int"}, {Name: "jpg", Encoding: "jpeg"}, {Name: "txt", Encoding: "str"}}
	if diff := cmp.Diff(wantCols, rep.Columns); diff != "" {
		t.Fatalf("columns (-want +got):\n%s", diff)
	}
	checkTarSamples(t, readDataset(t, out), want)

	srv := httptest.NewServer(http.FileServer(http.Dir(tars)))
	defer srv.Close()
	out2 := filepath.Join(dir, "remote")
	runConvert(t, &Options{Input: srv.URL + "/shard-{000000..000002}.tar", Output: out2})
	sameDataFiles(t, out, out2)
}

func TestMDSReshardRecompress(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	writeFile(t, in, jsonlRecords(2000))
	first := filepath.Join(dir, "first")
	runConvert(t, &Options{Input: in, Output: first, SizeLimit: 16 << 10, Compression: "gz"})
	second := filepath.Join(dir, "second")
	rep := runConvert(t, &Options{Input: first, Output: second, SizeLimit: 100 << 10, Compression: "zstd:5", Hashes: []string{"sha256"}})
	if rep.SamplesOut != 2000 {
		t.Fatalf("re-shard wrote %d samples", rep.SamplesOut)
	}
	a, b := readDataset(t, first), readDataset(t, second)
	if diff := cmp.Diff(a, b); diff != "" {
		t.Fatalf("re-sharded samples differ (-first +second):\n%s", diff)
	}
	// Converting back with the first settings gives the first dataset's bytes.
	third := filepath.Join(dir, "third")
	runConvert(t, &Options{Input: second, Output: third, SizeLimit: 16 << 10, Compression: "gz"})
	if diff := cmp.Diff(a, readDataset(t, third)); diff != "" {
		t.Fatalf("round trip differs:\n%s", diff)
	}
	// gzip output embeds no time here (our encoder writes mtime 0), so the
	// raw hashes in the index must match exactly.
	ia, _ := os.ReadFile(filepath.Join(first, "index.json"))
	ic, _ := os.ReadFile(filepath.Join(third, "index.json"))
	xa, _ := format.ParseIndex(ia)
	xc, _ := format.ParseIndex(ic)
	if len(xa.Shards) != len(xc.Shards) {
		t.Fatalf("shard counts %d vs %d", len(xa.Shards), len(xc.Shards))
	}
	for k := range xa.Shards {
		if diff := cmp.Diff(xa.Shards[k].RawData, xc.Shards[k].RawData); diff != "" {
			t.Fatalf("shard %d raw file differs:\n%s", k, diff)
		}
	}
}

// TestRerunFinished: the same command on a finished output succeeds and
// rewrites nothing; another command fails and says what differs.
func TestRerunFinished(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	writeFile(t, in, jsonlRecords(10))
	out := filepath.Join(dir, "out")
	first := runConvert(t, &Options{Input: in, Output: out})
	before := dirFiles(t, out)
	again := runConvert(t, &Options{Input: in, Output: out})
	if again.SamplesOut != first.SamplesOut || again.Fingerprint != first.Fingerprint {
		t.Fatalf("rerun report %+v, first %+v", again, first)
	}
	after := dirFiles(t, out)
	if len(before) != len(after) {
		t.Fatalf("rerun changed the file set: %d -> %d files", len(before), len(after))
	}
	for k, v := range before {
		if !bytes.Equal(v, after[k]) {
			t.Fatalf("rerun rewrote %s", k)
		}
	}
	_, err := runConvertErr(t, &Options{Input: in, Output: out, Compression: "zstd"})
	if !errors.Is(err, ErrOutputExists) || !strings.Contains(err.Error(), "compression") {
		t.Fatalf("another command on the finished dataset: err = %v", err)
	}
	os.Remove(filepath.Join(out, ReportFile))
	if _, err := runConvertErr(t, &Options{Input: in, Output: out}); !errors.Is(err, ErrOutputExists) {
		t.Fatalf("a dataset without a report: err = %v", err)
	}
}

// TestFirstBadRecordNamed: the error names the first bad record of the
// input, whichever worker fails first.
func TestFirstBadRecordNamed(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	writeFile(t, in, jsonlRecords(5000))
	for i := range 10 {
		_, err := runConvertErr(t, &Options{Input: in, Output: filepath.Join(dir, fmt.Sprint(i)), Workers: 4, BatchSize: 16,
			Columns: []input.Column{{Name: "id", Encoding: "int"}, {Name: "nosuch", Encoding: "int"}}})
		if err == nil || !strings.Contains(err.Error(), "in.jsonl:1:") {
			t.Fatalf("run %d: err = %v, want it to name in.jsonl:1", i, err)
		}
	}
}

func TestOddOptionsRejected(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	writeFile(t, in, jsonlRecords(10))
	for _, o := range []*Options{{Workers: -3}, {FetchConcurrency: -1}, {BatchSize: -5}, {Nulls: "maybe"}, {FetchTimeout: -time.Second}} {
		o.Input, o.Output = in, filepath.Join(dir, "out")
		if _, err := runConvertErr(t, o); err == nil {
			t.Errorf("options %+v accepted", *o)
		}
	}
}
