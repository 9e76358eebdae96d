package convert

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/wds"
)

func TestCorruptInputsNameTheFile(t *testing.T) {
	dir := t.TempDir()
	// An MDS dataset whose first shard has a broken offset table.
	in := filepath.Join(dir, "in.jsonl")
	writeFile(t, in, jsonlRecords(50))
	ds := filepath.Join(dir, "ds")
	runConvert(t, &Options{Input: in, Output: ds})
	shard := filepath.Join(ds, "shard.00000.mds")
	b, err := os.ReadFile(shard)
	if err != nil {
		t.Fatal(err)
	}
	b[8], b[9], b[10], b[11] = 0xff, 0xff, 0xff, 0x7f // offsets[1]
	if err := os.WriteFile(shard, b, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = runConvertErr(t, &Options{Input: ds, Output: filepath.Join(dir, "o1")})
	if !errors.Is(err, format.ErrCorrupt) || !strings.Contains(err.Error(), "shard.00000.mds") {
		t.Errorf("corrupt MDS input: err = %v, want ErrCorrupt naming shard.00000.mds", err)
	}

	// A truncated WebDataset tar.
	tars := filepath.Join(dir, "tars")
	writeTars(t, tars, 1, 5)
	tb, err := os.ReadFile(filepath.Join(tars, "shard-000000.tar"))
	if err != nil {
		t.Fatal(err)
	}
	// Cut inside the data of the third sample's first member.
	writeFile(t, filepath.Join(tars, "cut.tar"), tb[:2*len(tb)/5+700])
	_, err = runConvertErr(t, &Options{Input: filepath.Join(tars, "cut.tar"), Output: filepath.Join(dir, "o2")})
	if err == nil || !strings.Contains(err.Error(), "cut.tar") {
		t.Errorf("truncated tar: err = %v, want an error naming cut.tar", err)
	}
	if !errors.Is(err, wds.ErrCorrupt) && !strings.Contains(err.Error(), "missing") {
		t.Errorf("truncated tar: err = %v, want corruption or a missing field", err)
	}

	// A file that is not Parquet.
	writeFile(t, filepath.Join(dir, "bad.parquet"), []byte("PAR1 this is not parquet PAR1"))
	_, err = runConvertErr(t, &Options{Input: filepath.Join(dir, "bad.parquet"), Output: filepath.Join(dir, "o3")})
	if err == nil || !strings.Contains(err.Error(), "bad.parquet") {
		t.Errorf("bad parquet: err = %v", err)
	}
}
