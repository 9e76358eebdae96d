package convert

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicedata/sluice/format"
)

// TestLocalInputFiles: input files as users name them. A symbolic link to
// a file in another directory (a dataset prepared as links) converts as
// its target; a compressed file and anything that is not a regular file (a
// pipe: sluice convert <(zcat ...), a device) fail at once, saying why.
// Before, the link was refused by the store of its directory ("path escapes
// from parent") and that refusal retried with backoff for about six
// minutes; a compressed file read "filestore: ... is not a directory".
func TestLocalInputFiles(t *testing.T) {
	dir := t.TempDir()
	data := []byte("{\"id\": 1, \"text\": \"a\"}\n{\"id\": 2, \"text\": \"b\"}\n")
	writeFile(t, filepath.Join(dir, "real", "in.jsonl"), data)
	links := filepath.Join(dir, "links")
	writeFile(t, filepath.Join(links, "keep"), nil)
	link := filepath.Join(links, "in.jsonl")
	if err := syscall.Symlink(filepath.Join(dir, "real", "in.jsonl"), link); err != nil {
		t.Fatal(err)
	}
	run := func(in, format string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		out := filepath.Join(t.TempDir(), "out")
		_, err := Run(ctx, &Options{Input: in, Output: out, Format: format, Registry: testRegistry()})
		if err == nil && readDataset(t, out) == nil {
			t.Errorf("%s: no samples", in)
		}
		return err
	}
	if err := run(link, ""); err != nil {
		t.Errorf("a link to a file elsewhere: %v", err)
	}

	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(data)
	zw.Close()
	writeFile(t, filepath.Join(dir, "in.jsonl.gz"), gz.Bytes())
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ in, format, want string }{
		{filepath.Join(dir, "in.jsonl.gz"), "", "is compressed (.gz)"},
		{filepath.Join(dir, "in.jsonl.gz"), "jsonl", "is compressed (.gz)"},
		{fifo, "jsonl", "is a pipe"},
		{"/dev/null", "jsonl", "is a device"},
	} {
		start := time.Now()
		err := run(c.in, c.format)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s (format %q): %v, want an error saying it %s", c.in, c.format, err, c.want)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("%s: failed after %v, not at once", c.in, d)
		}
	}
}

// TestImageFolderFollowsLinks: an image folder made of symbolic links (to
// image files elsewhere, to a whole class directory elsewhere) holds the
// images they point at, as torchvision's ImageFolder reads it (checked
// with torchvision 0.14: 8 samples, classes cat, cat2, dog); a link back
// up the folder (a cycle) is not followed forever and a dangling link is
// skipped. Before, every link was skipped without a word: 2 of the 8
// images converted, "PASSED, 0 skipped".
func TestImageFolderFollowsLinks(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	root := filepath.Join(dir, "folder")
	var imgs [][]byte
	for i := range 5 {
		imgs = append(imgs, makeJPEG(t, i, 8, 8))
	}
	for i := range 3 {
		writeFile(t, filepath.Join(src, "cat", fmt.Sprintf("%d.jpg", i)), imgs[i])
	}
	writeFile(t, filepath.Join(root, "dog", "0.jpg"), imgs[3])
	writeFile(t, filepath.Join(root, "dog", "1.jpg"), imgs[4])
	if err := os.Mkdir(filepath.Join(root, "cat"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, l := range []struct{ target, link string }{
		{filepath.Join(src, "cat", "0.jpg"), "cat/0.jpg"},
		{filepath.Join(src, "cat", "1.jpg"), "cat/1.jpg"},
		{filepath.Join(src, "cat", "2.jpg"), "cat/2.jpg"},
		{filepath.Join(src, "cat"), "cat2"},
		{root, "dog/loop"},
		{filepath.Join(dir, "nothing.jpg"), "dog/gone.jpg"},
	} {
		if err := syscall.Symlink(l.target, filepath.Join(root, l.link)); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "out")
	runConvert(t, &Options{Input: root, Output: out})
	got := readDataset(t, out)
	want := []struct {
		img   int
		label int64
	}{{0, 0}, {1, 0}, {2, 0}, {0, 1}, {1, 1}, {2, 1}, {3, 2}, {4, 2}}
	if len(got) != len(want) {
		t.Fatalf("%d samples, want %d", len(got), len(want))
	}
	for i, w := range want {
		if img := got[i]["image"].(*format.Image); !bytes.Equal(img.Encoded, imgs[w.img]) || got[i]["label"] != w.label {
			t.Errorf("sample %d: label %v, want image %d label %d", i, got[i]["label"], w.img, w.label)
		}
	}
}
