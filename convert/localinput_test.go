package convert

import (
	"bytes"
	"compress/gzip"
	"context"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
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
