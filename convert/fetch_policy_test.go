package convert

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicedata/sluice/format"
)

// TestFetchUntrustedManifest: a scraped manifest pointing at local files,
// cloud buckets, metadata addresses, missing objects and text disguised as
// JPEG. Nothing but the real JPEGs is embedded, every other row is counted
// under its own reason, and the failures count against the success rate.
func TestFetchUntrustedManifest(t *testing.T) {
	dir := t.TempDir()
	jpg := makeJPEG(t, 1, 16, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/ok"):
			w.Write(jpg)
		case r.URL.Path == "/text.jpg":
			w.Write([]byte("<html>not an image</html>"))
		case r.URL.Path == "/png.jpg":
			w.Write(makePNG(t, 4, 4))
		case r.URL.Path == "/meta.jpg":
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
		case r.URL.Path == "/boom.jpg":
			http.Error(w, "boom", http.StatusInternalServerError)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	secret := filepath.Join(dir, "secret.txt")
	writeFile(t, secret, []byte("TOP SECRET"))
	var m strings.Builder
	rows := []string{
		srv.URL + "/ok1.jpg", srv.URL + "/ok2.jpg", srv.URL + "/ok3.jpg", srv.URL + "/ok4.jpg",
		"file://" + secret, secret, "s3://bucket/key.jpg", "gs://bucket/key.jpg",
		srv.URL + "/text.jpg", srv.URL + "/png.jpg", srv.URL + "/meta.jpg", srv.URL + "/missing.jpg", srv.URL + "/boom.jpg",
	}
	for i, u := range rows {
		fmt.Fprintf(&m, "{\"i\": %d, \"url\": %q}\n", i, u)
	}
	in := filepath.Join(dir, "m.jsonl")
	writeFile(t, in, []byte(m.String()))
	out := filepath.Join(dir, "out")
	rep, err := runConvertErr(t, &Options{
		Input: in, Output: out, FetchAllowNets: loopbackNets, FetchAttempts: 2, FetchBaseDelay: time.Millisecond,
		Fetch: []FetchColumn{{Column: "url", Encoding: "jpeg"}}, MinSuccessRate: 0.5,
	})
	if err == nil || rep == nil || rep.Passed {
		t.Fatalf("4 of 13 fetches good passed the 50%% gate: %v", err)
	}
	want := map[string]int64{"scheme_not_allowed": 4, "invalid_jpeg": 2, "blocked_address": 1, "not_found": 1, "http_500": 1}
	for k, v := range want {
		if rep.Failures[k] != v {
			t.Errorf("failures[%s] = %d, want %d (all: %v)", k, rep.Failures[k], v, rep.Failures)
		}
	}
	if rep.FetchSucceeded != 4 || rep.SamplesOut != 4 {
		t.Errorf("fetch succeeded %d, samples out %d; want 4 and 4", rep.FetchSucceeded, rep.SamplesOut)
	}
	// Shards hold no local file's bytes.
	err = filepath.Walk(out, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		b, _ := os.ReadFile(p)
		if strings.Contains(string(b), "TOP SECRET") {
			t.Errorf("%s holds the local file's bytes", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// With the local files allowed under their root and a lower gate the
	// run passes and embeds only real JPEGs.
	out2 := filepath.Join(dir, "out2")
	imgs := filepath.Join(dir, "imgs")
	writeFile(t, filepath.Join(imgs, "a.jpg"), jpg)
	in2 := filepath.Join(dir, "m2.jsonl")
	writeFile(t, in2, []byte(m.String()+fmt.Sprintf("{\"i\": 99, \"url\": %q}\n", filepath.Join(imgs, "a.jpg"))))
	rep2 := runConvert(t, &Options{
		Input: in2, Output: out2, FetchAllowNets: loopbackNets, FetchAttempts: 1, FetchFileRoot: imgs,
		Fetch: []FetchColumn{{Column: "url", Encoding: "jpeg"}},
	})
	if rep2.SamplesOut != 5 || rep2.Failures["outside_root"] != 2 || rep2.Failures["scheme_not_allowed"] != 2 {
		t.Fatalf("with a file root: out %d, failures %v", rep2.SamplesOut, rep2.Failures)
	}
	for _, s := range readDataset(t, out2) {
		if im, ok := s["url"].(*format.Image); !ok || im.Format != "JPEG" {
			t.Fatalf("sample %v is not a JPEG", s["i"])
		}
	}
}
