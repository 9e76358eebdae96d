package cli

import (
	"bytes"
	"fmt"
	"image"
	"image/jpeg"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConvertFetchFlags: the fetch policy flags reach the fetcher — the
// loopback server is refused by default and fetched with
// --fetch-allow-net, text served as .jpg is counted as invalid_jpeg, and
// a file:// row needs --fetch-file-root.
func TestConvertFetchFlags(t *testing.T) {
	var jpg bytes.Buffer
	if err := jpeg.Encode(&jpg, image.NewGray(image.Rect(0, 0, 4, 4)), nil); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/text.jpg" {
			w.Write([]byte("hello"))
			return
		}
		w.Write(jpg.Bytes())
	}))
	defer srv.Close()
	dir := t.TempDir()
	local := filepath.Join(dir, "imgs", "l.jpg")
	if err := os.MkdirAll(filepath.Dir(local), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(local, jpg.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(dir, "m.csv")
	manifest := fmt.Sprintf("url\n%s/a.jpg\n%s/b.jpg\n%s/text.jpg\nfile://%s\n", srv.URL, srv.URL, srv.URL, local)
	if err := os.WriteFile(in, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	base := []string{"convert", in, "", "--fetch", "url:jpeg", "--fetch-attempts", "1", "--progress", "none"}
	run := func(out string, extra ...string) string {
		args := append(append([]string{}, base...), extra...)
		args[2] = filepath.Join(dir, out)
		stdout, _, err := runConvertCLI(t, args...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", extra, err, stdout)
		}
		return stdout
	}
	if s := run("default"); !strings.Contains(s, "blocked_address") || !strings.Contains(s, "scheme_not_allowed") {
		t.Fatalf("default policy:\n%s", s)
	}
	s := run("allowed", "--fetch-allow-net", "127.0.0.1", "--fetch-file-root", filepath.Join(dir, "imgs"))
	if !strings.Contains(s, "3 out, 1 skipped") || !strings.Contains(s, "invalid_jpeg") {
		t.Fatalf("allowed:\n%s", s)
	}
}
