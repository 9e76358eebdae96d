package xsv_test

import (
	"crypto/sha256"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/xsv"
)

func TestAppendDump(t *testing.T) {
	dir := write(t, &xsv.WriterOptions{Columns: map[string]string{"x": "int", "s": "str", "f": "float"}},
		[]format.Sample{{"x": 1, "s": "é\"", "f": 0.5}})
	info := readIndex(t, dir).Shards[0]
	if got := readFile(t, filepath.Join(dir, info.RawData.Basename)); got != "f,s,x\n0.5,é\",1\n" {
		t.Fatalf("data %q", got)
	}
	sh, err := xsv.OpenDir(dir, &info)
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	got, err := xsv.AppendDump(nil, 7, 3, sh, 0)
	if err != nil {
		t.Fatal(err)
	}
	sum := func(s string) string { return fmt.Sprintf("%x", sha256.Sum256([]byte(s))) }
	want := `{"cols": {"f": {"raw_len": 3, "raw_sha256": "` + sum("0.5") + `", "v": {"bits": "3fe0000000000000", "s": "0.5"}}, ` +
		`"s": {"raw_len": 3, "raw_sha256": "` + sum("é\"") + `", "v": "é\""}, ` +
		`"x": {"raw_len": 1, "raw_sha256": "` + sum("1") + `", "v": 1}}, "i": 7, "shard": 3}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
