package convert

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicedata/sluice/format"
)

// TestImageFolderRealTypes: an image folder as people have it — a PNG
// named .jpg, a truncated JPEG, text named .jpg, notes, a file outside the
// classes. Every skip is counted by reason, the real type decides, and
// the class → label mapping is written next to the index and into the
// report.
func TestImageFolderRealTypes(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "imgs")
	good := makeJPEG(t, 1, 16, 12)
	writeFile(t, filepath.Join(root, "cat", "a.jpg"), good)
	writeFile(t, filepath.Join(root, "cat", "b.jpg"), makeJPEG(t, 2, 16, 12))
	writeFile(t, filepath.Join(root, "cat", "png.jpg"), makePNG(t, 5, 4))
	writeFile(t, filepath.Join(root, "dog", "c.jpg"), makeJPEG(t, 3, 16, 12))
	writeFile(t, filepath.Join(root, "dog", "broken.jpg"), good[:len(good)/2])
	writeFile(t, filepath.Join(root, "dog", "text.jpg"), []byte("just some text"))
	writeFile(t, filepath.Join(root, "dog", "notes.txt"), []byte("notes"))
	writeFile(t, filepath.Join(root, "README.md"), []byte("readme"))

	out := filepath.Join(dir, "jpeg")
	rep := runConvert(t, &Options{Input: root, Output: out})
	want := map[string]int64{"wrong_type": 1, "broken_image": 1, "not_image": 2, "no_class": 1}
	for k, v := range want {
		if rep.Failures[k] != v {
			t.Errorf("failures[%s] = %d, want %d (all %v)", k, rep.Failures[k], v, rep.Failures)
		}
	}
	if rep.SamplesOut != 3 || rep.SamplesIn != 8 || rep.Columns[0].Encoding != "jpeg" {
		t.Fatalf("out %d in %d columns %v", rep.SamplesOut, rep.SamplesIn, rep.Columns)
	}
	raw, err := os.ReadFile(filepath.Join(out, LabelsFile))
	if err != nil {
		t.Fatal(err)
	}
	var labels map[string]int64
	if err := json.Unmarshal(raw, &labels); err != nil || len(labels) != 2 || labels["cat"] != 0 || labels["dog"] != 1 {
		t.Fatalf("labels.json = %s (%v)", raw, err)
	}
	if rep.Labels["dog"] != 1 {
		t.Fatalf("report labels %v", rep.Labels)
	}
	for _, s := range readDataset(t, out) {
		if im := s["image"].(*format.Image); im.Width != 16 {
			t.Fatalf("a kept image decodes to %dx%d", im.Width, im.Height)
		}
	}

	// pil keeps the PNG (converted); bytes keeps whatever starts like an
	// image, broken or not.
	rep = runConvert(t, &Options{Input: root, Output: filepath.Join(dir, "pil"), ImageEncoding: "pil"})
	if rep.SamplesOut != 4 || rep.Failures["broken_image"] != 1 || rep.Columns[0].Encoding != "pil" {
		t.Fatalf("pil: out %d failures %v", rep.SamplesOut, rep.Failures)
	}
	widths := map[int]int{}
	for _, s := range readDataset(t, filepath.Join(dir, "pil")) {
		widths[s["image"].(*format.Image).Width]++
	}
	if widths[16] != 3 || widths[5] != 1 {
		t.Fatalf("pil widths %v", widths)
	}
	rep = runConvert(t, &Options{Input: root, Output: filepath.Join(dir, "bytes"), ImageEncoding: "bytes"})
	if rep.SamplesOut != 5 || rep.Failures["not_image"] != 2 {
		t.Fatalf("bytes: out %d failures %v", rep.SamplesOut, rep.Failures)
	}
	if _, err := runConvertErr(t, &Options{Input: root, Output: filepath.Join(dir, "x"), ImageEncoding: "gif"}); err == nil {
		t.Fatal("image encoding gif accepted")
	}
}
