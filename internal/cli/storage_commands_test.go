package cli_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sluicedata/sluice/internal/cli"
)

// sluice runs the command line in-process and returns its output.
func sluice(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err = cli.Run(context.Background(), args, &out, &errOut)
	return out.String(), errOut.String(), err
}

// writeDataset writes a small MDS-shaped dataset (an index and shards)
// under dir and returns its files and contents.
func writeDataset(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	var shards []string
	for i := range 3 {
		name := fmt.Sprintf("shard.%05d.mds", i)
		files[name] = bytes.Repeat([]byte{byte('a' + i)}, 10_000*(i+1))
		shards = append(shards, fmt.Sprintf(`{"raw_data": {"basename": %q, "bytes": %d}, "zip_data": null}`, name, len(files[name])))
	}
	files["index.json"] = []byte(`{"version": 2, "shards": [` + strings.Join(shards, ", ") + `]}`)
	files["sub/notes.txt"] = []byte("not in the index")
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return files
}

func checkFiles(t *testing.T, dir string, want map[string][]byte) {
	t.Helper()
	for name, data := range want {
		got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("%s: %d bytes, %v; want %d bytes", name, len(got), err, len(data))
		}
	}
}

func TestCpAndLsLocal(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	files := writeDataset(t, src)
	dst := filepath.Join(t.TempDir(), "dst", "copy")

	out, _, err := sluice(t, "cp", src, "file://"+dst)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "copied 5 objects, ") || !strings.Contains(out, "/s") {
		t.Errorf("cp output %q", out)
	}
	checkFiles(t, dst, files)

	out, _, err = sluice(t, "ls", dst)
	if err != nil {
		t.Fatal(err)
	}
	if want := "index.json\nshard.00000.mds\nshard.00001.mds\nshard.00002.mds\nsub/notes.txt\n"; out != want {
		t.Errorf("ls output\n%s\nwant\n%s", out, want)
	}
	out, errOut, err := sluice(t, "ls", "-l", "--bytes", dst)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "30000") || !strings.Contains(out, "shard.00002.mds") || !strings.Contains(errOut, "5 objects") {
		t.Errorf("ls -l output %q, stderr %q", out, errOut)
	}

	// Again, skipping what is there.
	out, _, err = sluice(t, "cp", "--skip-existing", src, dst)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "copied 0 objects") || !strings.Contains(out, "skipped 5") {
		t.Errorf("resumed cp output %q", out)
	}
}

func TestCpFromHTTP(t *testing.T) {
	src := t.TempDir()
	files := writeDataset(t, src)
	srv := httptest.NewServer(http.FileServer(http.Dir(src)))
	defer srv.Close()
	dst := t.TempDir()
	out, _, err := sluice(t, "cp", srv.URL+"/", dst)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "copied 4 objects") {
		t.Errorf("cp output %q", out)
	}
	delete(files, "sub/notes.txt") // not named by the index
	checkFiles(t, dst, files)
	if _, err := os.Stat(filepath.Join(dst, "sub")); err == nil {
		t.Error("copied a file the index does not name")
	}
	out, _, err = sluice(t, "ls", srv.URL)
	if err != nil || !strings.Contains(out, "shard.00001.mds") {
		t.Errorf("ls over HTTP = %q, %v", out, err)
	}
}

func TestCpErrors(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	writeDataset(t, src)
	empty := httptest.NewServer(http.NotFoundHandler())
	defer empty.Close()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"missing source", []string{"cp", filepath.Join(t.TempDir(), "nothing"), t.TempDir()}, "no objects"},
		{"same place", []string{"cp", src, src}, "same place"},
		{"inside the source", []string{"cp", src, filepath.Join(src, "sub")}, "same place"},
		{"bad concurrency", []string{"cp", "-j", "0", src, t.TempDir()}, "concurrency"},
		{"bad progress", []string{"cp", "--progress", "loud", src, t.TempDir()}, "progress"},
		{"unknown scheme", []string{"cp", "gopher://x/y", t.TempDir()}, "unsupported scheme"},
		{"HTTP without index", []string{"cp", empty.URL + "/none", t.TempDir()}, "index.json"},
		{"ls missing", []string{"ls", filepath.Join(t.TempDir(), "nothing")}, "no objects"},
		{"ls needs a URL", []string{"ls"}, "arg"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := sluice(t, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%v = %v, want an error mentioning %q", tt.args, err, tt.want)
			}
		})
	}
}

func TestCpProgressBar(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	files := writeDataset(t, src)
	dst := t.TempDir()
	out, errOut, err := sluice(t, "cp", "--progress", "bar", src, dst)
	if err != nil {
		t.Fatal(err)
	}
	checkFiles(t, dst, files)
	// The bar counts objects committed at DST.
	if !strings.Contains(errOut, "cp 5/5 objects") || !strings.HasPrefix(out, "copied 5 objects") {
		t.Errorf("bar output %q, summary %q", errOut, out)
	}
	// Not a terminal: lines (as convert prints), counting objects committed.
	_, errOut, err = sluice(t, "cp", src, t.TempDir())
	if err != nil || !strings.Contains(errOut, "cp: 5/5 objects") || strings.Contains(errOut, "\r") {
		t.Errorf("cp without a terminal wrote %q to stderr (%v)", errOut, err)
	}
	_, errOut, err = sluice(t, "cp", "--progress", "none", src, t.TempDir())
	if err != nil || errOut != "" {
		t.Errorf("cp --progress none wrote %q to stderr (%v)", errOut, err)
	}
}

func TestLsReportsRetries(t *testing.T) {
	src := t.TempDir()
	writeDataset(t, src)
	files := http.FileServer(http.Dir(src))
	var failed atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if failed.CompareAndSwap(false, true) {
			http.Error(w, "hiccup", http.StatusInternalServerError)
			return
		}
		files.ServeHTTP(w, r)
	}))
	defer srv.Close()
	out, errOut, err := sluice(t, "ls", srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "index.json") || !strings.Contains(errOut, "retrying stat "+srv.URL+"/index.json") || !strings.Contains(errOut, "500") {
		t.Errorf("stdout %q, stderr %q", out, errOut)
	}
}
