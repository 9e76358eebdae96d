package fetch_test

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/jpeg"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicedata/sluice/convert/fetch"
	"github.com/sluicedata/sluice/storage"
)

func smallJPEG(t testing.TB) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := jpeg.Encode(&b, image.NewGray(image.Rect(0, 0, 8, 8)), nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// hostile serves what a scraped manifest points at: good JPEGs, 404s,
// 500s, slow answers, redirects to private, metadata and file URLs, and
// text disguised as .jpg.
func hostile(t *testing.T) (*httptest.Server, map[string]int, *sync.Mutex) {
	jpg := smallJPEG(t)
	var mu sync.Mutex
	hits := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.URL.Path]++
		mu.Unlock()
		switch r.URL.Path {
		case "/ok.jpg":
			w.Write(jpg)
		case "/missing.jpg":
			http.NotFound(w, r)
		case "/gone.jpg":
			http.Error(w, "gone", http.StatusGone)
		case "/boom.jpg":
			http.Error(w, "boom", http.StatusInternalServerError)
		case "/slow.jpg":
			select {
			case <-time.After(5 * time.Second):
			case <-r.Context().Done():
			}
			w.Write(jpg)
		case "/to-ok.jpg":
			http.Redirect(w, r, "/ok.jpg", http.StatusFound)
		case "/to-metadata.jpg":
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/iam/security-credentials/", http.StatusFound)
		case "/to-private.jpg":
			http.Redirect(w, r, "http://10.1.2.3/x.jpg", http.StatusFound)
		case "/to-ipv6-metadata.jpg":
			http.Redirect(w, r, "http://[fd00:ec2::254]/latest/", http.StatusFound)
		case "/to-file.jpg":
			http.Redirect(w, r, "file:///etc/passwd", http.StatusFound)
		case "/loop.jpg":
			http.Redirect(w, r, "/loop.jpg", http.StatusFound)
		case "/text.jpg":
			w.Header().Set("Content-Type", "image/jpeg")
			w.Write([]byte("root:x:0:0:root:/root:/bin/bash\n"))
		case "/truncated.jpg":
			w.Write(jpg[:len(jpg)/2])
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, hits, &mu
}

func reasonOf(t *testing.T, f *fetch.Fetcher, u string) (string, int) {
	t.Helper()
	_, err := f.Fetch(context.Background(), u)
	if err == nil {
		return "", 0
	}
	var fe *fetch.Error
	if !errors.As(err, &fe) {
		t.Fatalf("%s: error %v is not a *fetch.Error", u, err)
	}
	if strings.Contains(fe.Error(), "secret") {
		t.Errorf("error message leaks the query string: %v", fe)
	}
	return fe.Reason, fe.Attempts
}

func TestDefaultPolicyRefusesLoopbackAndOtherSchemes(t *testing.T) {
	srv, hits, mu := hostile(t)
	f, err := fetch.New(&fetch.Options{Registry: registry(), BaseDelay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// The default policy refuses the loopback server, by IP and by a name
	// that resolves to it (the check is on the dialled address).
	port := srv.URL[strings.LastIndex(srv.URL, ":"):]
	// A literal address is refused before any attempt; a name when the
	// address it resolves to is dialled.
	for u, attempts := range map[string]int{srv.URL + "/ok.jpg": 0, "http://localhost" + port + "/ok.jpg": 1} {
		if r, n := reasonOf(t, f, u); r != "blocked_address" || n != attempts {
			t.Errorf("%s: reason %q after %d attempts, want blocked_address after %d", u, r, n, attempts)
		}
	}
	mu.Lock()
	if hits["/ok.jpg"] != 0 {
		t.Errorf("the refused server got %d requests", hits["/ok.jpg"])
	}
	mu.Unlock()
	for _, u := range []string{"file:///etc/passwd", "/etc/passwd", "s3://bucket/key.jpg", "gs://b/k", "az://acct/c/k", "ftp://x/y"} {
		if r, _ := reasonOf(t, f, u); r != "scheme_not_allowed" {
			t.Errorf("%s: reason %q, want scheme_not_allowed", u, r)
		}
	}
}

func TestPolicyRedirectsAndStatuses(t *testing.T) {
	srv, hits, mu := hostile(t)
	f, err := fetch.New(&fetch.Options{
		Registry: registry(), Policy: loopback, BaseDelay: time.Millisecond, Attempts: 3,
		Timeout: 10 * time.Second, Check: fetch.CheckEncoding("jpeg"), CheckReason: "invalid_jpeg",
	})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	impatient, err := fetch.New(&fetch.Options{Registry: registry(), Policy: loopback, BaseDelay: time.Millisecond, Attempts: 3, Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer impatient.Close()
	cases := []struct {
		path, reason string
		attempts     int
	}{
		{"/ok.jpg", "", 0},
		{"/to-ok.jpg", "", 0},
		{"/missing.jpg", "not_found", 1},
		{"/gone.jpg", "not_found", 1},
		{"/boom.jpg", "http_500", 3},
		{"/slow.jpg", "timeout", 3},
		{"/to-metadata.jpg", "blocked_address", 1},
		{"/to-private.jpg", "blocked_address", 1},
		{"/to-ipv6-metadata.jpg", "blocked_address", 1},
		{"/to-file.jpg", "redirect_refused", 1},
		{"/loop.jpg", "redirect_refused", 1},
		{"/text.jpg", "invalid_jpeg", 1},
		{"/truncated.jpg", "invalid_jpeg", 1},
	}
	for _, c := range cases {
		ff := f
		if c.path == "/slow.jpg" {
			ff = impatient
		}
		r, n := reasonOf(t, ff, srv.URL+c.path+"?token=secret")
		if r != c.reason || n != c.attempts {
			t.Errorf("%s: reason %q after %d attempts, want %q after %d", c.path, r, n, c.reason, c.attempts)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if hits["/missing.jpg"] != 1 || hits["/boom.jpg"] != 3 {
		t.Errorf("requests: missing %d (want 1: 404 is permanent), boom %d (want 3)", hits["/missing.jpg"], hits["/boom.jpg"])
	}
}

func TestFileRoot(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "in.bin"), []byte("inside"), 0o644); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(outside, "private.txt")
	if err := os.WriteFile(secret, []byte("private"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(root, "link.bin")); err != nil {
		t.Fatal(err)
	}
	f, err := fetch.New(&fetch.Options{Registry: &storage.Registry{}, Policy: fetch.Policy{FileRoot: root}})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if b, err := f.Fetch(context.Background(), "file://"+filepath.Join(root, "in.bin")); err != nil || string(b) != "inside" {
		t.Fatalf("inside the root: %q, %v", b, err)
	}
	for _, u := range []string{secret, "file://" + secret, filepath.Join(root, "..", filepath.Base(outside), "private.txt"), filepath.Join(root, "link.bin"), "file:///etc/passwd"} {
		if r, _ := reasonOf(t, f, u); r != "outside_root" {
			t.Errorf("%s: reason %q, want outside_root", u, r)
		}
	}
	if r, _ := reasonOf(t, f, filepath.Join(root, "nosuch")); r != "not_found" {
		t.Errorf("missing file: %q", r)
	}
	if _, err := fetch.New(&fetch.Options{Registry: &storage.Registry{}, Policy: fetch.Policy{Schemes: []string{"file"}}}); err == nil {
		t.Error("the file scheme without a root was accepted")
	}
}

func TestParseNets(t *testing.T) {
	nets, err := fetch.ParseNets("127.0.0.1, 10.0.0.0/8,::1")
	if err != nil || len(nets) != 3 || nets[0] != netip.MustParsePrefix("127.0.0.1/32") {
		t.Fatalf("ParseNets = %v, %v", nets, err)
	}
	if _, err := fetch.ParseNets("10.0.0.0/99"); err == nil {
		t.Fatal("bad prefix accepted")
	}
}

// TestLyingContentLength: a server that declares a huge length and sends
// a few bytes costs a few bytes, and a declared length over the cap fails
// at once as too_large.
func TestLyingContentLength(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/huge" {
			w.Header().Set("Content-Length", "999999999999")
			return
		}
		w.Header().Set("Content-Length", "100000000")
		w.WriteHeader(http.StatusOK)
		w.Write([]byte("short")) // then the connection ends early
	}))
	defer srv.Close()
	f, err := fetch.New(&fetch.Options{Registry: registry(), Policy: loopback, Attempts: 1, MaxBytes: 200 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if r, _ := reasonOf(t, f, srv.URL+"/huge"); r != "too_large" {
		t.Errorf("declared 1 TB: reason %q", r)
	}
	if r, _ := reasonOf(t, f, srv.URL+"/short"); r == "" {
		t.Error("a body shorter than its declared length was accepted")
	}
}
