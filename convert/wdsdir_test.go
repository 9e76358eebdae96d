package convert

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/wds"
	"github.com/sluicedata/sluice/storage/filestore"
	"github.com/sluicedata/sluice/stream"
)

// TestWebDatasetDirectory converts a directory of WebDataset tars, as
// sluice stream and sluice index take one: without an index (the tars in
// name order, nested ones too), and with the index sluice index writes
// beside them (the index's order). Both give the dataset the brace
// pattern gives. Before, the first was taken for an image folder ("has no
// images in class subdirectories") and the second for an MDS dataset
// ("shard 0 has format \"wds\"; only mds datasets can be re-sharded").
func TestWebDatasetDirectory(t *testing.T) {
	dir := t.TempDir()
	tars := filepath.Join(dir, "tars")
	want := writeTars(t, tars, 3, 5)
	// Top-level files besides the tars are not samples.
	writeFile(t, filepath.Join(tars, "README.md"), []byte("about"))
	byPattern := filepath.Join(dir, "pattern")
	runConvert(t, &Options{Input: filepath.Join(tars, "shard-{000000..000002}.tar"), Output: byPattern})

	byDir := filepath.Join(dir, "dir")
	runConvert(t, &Options{Input: tars, Output: byDir})
	checkTarSamples(t, readDataset(t, byDir), want)
	sameDataFiles(t, byPattern, byDir)

	b, err := filestore.New(tars)
	if err != nil {
		t.Fatal(err)
	}
	// The index lists the shards in reverse: its order rules.
	keys := []string{"shard-000002.tar", "shard-000001.tar", "shard-000000.tar"}
	idx, err := stream.BuildTarIndex(context.Background(), b, keys, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tars, format.IndexFile), format.AppendIndex(nil, idx), 0o644); err != nil {
		t.Fatal(err)
	}
	byIndex := filepath.Join(dir, "index")
	runConvert(t, &Options{Input: tars, Output: byIndex})
	got := readDataset(t, byIndex)
	reversed := append(append(append(want[:0:0], want[10:]...), want[5:10]...), want[:5]...)
	checkTarSamples(t, got, reversed)
}

// TestWebDatasetDirectoryOfLinks converts a directory whose tars are
// symbolic links to shards elsewhere (one of them inside a linked
// subdirectory) as the tars they point at. Before (with directories of
// tars taken at all), the directory's store skipped the links: only the
// one real tar was converted.
func TestWebDatasetDirectoryOfLinks(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	want := writeTars(t, src, 3, 4)
	links := filepath.Join(dir, "links")
	if err := os.MkdirAll(filepath.Join(src, "more"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(src, "shard-000002.tar"), filepath.Join(src, "more", "shard-000002.tar")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(links, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(src, "shard-000000.tar"), filepath.Join(links, "shard-000000.tar")); err != nil {
		t.Fatal(err)
	}
	for _, l := range []struct{ target, link string }{
		{filepath.Join(src, "shard-000001.tar"), "shard-000001.tar"},
		{filepath.Join(src, "more"), "z"},
	} {
		if err := os.Symlink(l.target, filepath.Join(links, l.link)); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "out")
	runConvert(t, &Options{Input: links, Output: out})
	checkTarSamples(t, readDataset(t, out), want)
}

// TestWebDatasetImageFieldsChecked: a WebDataset .jpg member becomes a
// jpeg column, stored as it is; one that is not a JPEG (text, a PNG, a
// header declaring more than fetch.MaxPixels) fails the conversion naming
// the record, or is skipped as invalid with --skip-invalid. Before, it was
// written ("PASSED, 0 skipped") and every reader failed on it during
// training (sluice dump: "JPEG value: invalid JPEG format: missing SOI
// marker").
func TestWebDatasetImageFieldsChecked(t *testing.T) {
	dir := t.TempDir()
	var buf bytes.Buffer
	w := wds.NewWriter(&buf)
	for i, img := range [][]byte{makeJPEG(t, 0, 8, 8), []byte("not a jpeg"), makePNG(t, 8, 8), hugeJPEGHeader()} {
		if err := w.Write(fmt.Sprintf("s%d", i), map[string][]byte{"jpg": img, "cls": []byte("1")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(dir, "shard-000000.tar")
	writeFile(t, in, buf.Bytes())
	_, err := runConvertErr(t, &Options{Input: in, Output: filepath.Join(dir, "strict")})
	if err == nil || !strings.Contains(err.Error(), "shard-000000.tar:2") || !strings.Contains(err.Error(), "not an image") {
		t.Errorf("strict: %v, want an error naming record 2, not an image", err)
	}
	out := filepath.Join(dir, "skip")
	rep := runConvert(t, &Options{Input: in, Output: out, SkipInvalid: true})
	if got := readDataset(t, out); len(got) != 1 || rep.Failures["invalid"] != 3 {
		t.Errorf("--skip-invalid: %d samples, failures %v; want 1 and 3 invalid", len(got), rep.Failures)
	}
}

// hugeJPEGHeader is a JPEG whose frame header declares 60000x60000 pixels.
func hugeJPEGHeader() []byte {
	return []byte{0xff, 0xd8, 0xff, 0xc0, 0, 17, 8, 0xea, 0x60, 0xea, 0x60, 3, 1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1, 0xff, 0xd9}
}
