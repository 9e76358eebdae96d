package convert

import (
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicedata/sluice/convert/input"
	"github.com/sluicedata/sluice/format"
)

// TestCSVByteOrderMark converts CSV files as Excel's "CSV UTF-8" export
// writes them, with a UTF-8 byte order mark before the header (a quoted
// first name too): the columns are named as pandas names them. Before,
// the mark was part of the first column's name ("\ufeffid"), so --columns
// id did not find it, and a quoted first name failed to parse.
func TestCSVByteOrderMark(t *testing.T) {
	dir := t.TempDir()
	for name, text := range map[string]string{
		"plain.csv":  "\ufeffid,text\r\n1,a\r\n2,b\r\n",
		"quoted.csv": "\ufeff\"id\",text\n1,a\n2,b\n",
		"tabs.tsv":   "\ufeffid\ttext\n1\ta\n2\tb\n",
	} {
		writeFile(t, filepath.Join(dir, name), []byte(text))
		out := filepath.Join(dir, "out-"+name)
		rep, err := runConvertErr(t, &Options{Input: filepath.Join(dir, name), Output: out})
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		want := []input.Column{{Name: "id", Encoding: "int"}, {Name: "text", Encoding: "str"}}
		if diff := cmp.Diff(want, rep.Columns); diff != "" {
			t.Errorf("%s: columns (-want +got):\n%s", name, diff)
		}
		if diff := cmp.Diff([]format.Sample{{"id": int64(1), "text": "a"}, {"id": int64(2), "text": "b"}}, readDataset(t, out)); diff != "" {
			t.Errorf("%s: samples (-want +got):\n%s", name, diff)
		}
	}
}

// TestJSONLByteOrderMark converts a JSON-lines file saved as "UTF-8 with
// BOM" (Windows editors' default): its records are read as without the
// mark. Before, its first line failed: "invalid JSON at byte 0: want a
// JSON object".
func TestJSONLByteOrderMark(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "bom.jsonl")
	writeFile(t, in, []byte("\ufeff{\"id\": 1, \"text\": \"a\"}\r\n{\"id\": 2, \"text\": \"b\"}\r\n"))
	out := filepath.Join(dir, "out")
	if _, err := runConvertErr(t, &Options{Input: in, Output: out}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]format.Sample{{"id": int64(1), "text": "a"}, {"id": int64(2), "text": "b"}}, readDataset(t, out)); diff != "" {
		t.Errorf("samples (-want +got):\n%s", diff)
	}
}
