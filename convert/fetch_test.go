package convert

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	_ "image/jpeg"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicedata/sluice/format"
)

// imageServer serves /img/N.jpg. Paths ending in 3 are missing (404);
// paths ending in 5 fail with 500 every time; paths ending in 7 answer 503
// on their first request and succeed afterwards (a retry recovers them).
type imageServer struct {
	t      testing.TB
	mu     sync.Mutex
	seen   map[string]int
	images map[string][]byte
}

func (s *imageServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.seen[r.URL.Path]++
	n := s.seen[r.URL.Path]
	s.mu.Unlock()
	p := strings.TrimSuffix(r.URL.Path, ".jpg")
	switch {
	case strings.HasSuffix(p, "3"):
		http.NotFound(w, r)
		return
	case strings.HasSuffix(p, "5"):
		http.Error(w, "boom", http.StatusInternalServerError)
		return
	case strings.HasSuffix(p, "7") && n == 1:
		w.Header().Set("Retry-After", "0")
		http.Error(w, "slow down", http.StatusServiceUnavailable)
		return
	}
	img, ok := s.images[r.URL.Path]
	if !ok {
		http.NotFound(w, r)
		return
	}
	http.ServeContent(w, r, "x.jpg", time.Time{}, bytes.NewReader(img))
}

func TestFetchManifest(t *testing.T) {
	dir := t.TempDir()
	srv := &imageServer{t: t, seen: map[string]int{}, images: map[string][]byte{}}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	var manifest bytes.Buffer
	const n = 200
	for i := range n {
		p := fmt.Sprintf("/img/%d.jpg", i)
		srv.images[p] = makeJPEG(t, i, 64, 48)
		fmt.Fprintf(&manifest, `{"url": %q, "caption": "image %d"}`+"\n", hs.URL+p, i)
	}
	in := filepath.Join(dir, "manifest.jsonl")
	writeFile(t, in, manifest.Bytes())

	out := filepath.Join(dir, "out")
	rep := runConvert(t, &Options{
		Input: in, Output: out, FetchAllowNets: loopbackNets, Fetch: []FetchColumn{{Column: "url", Encoding: "jpeg"}},
		FetchBaseDelay: time.Millisecond, FetchAttempts: 3, FetchConcurrency: 16, MinSuccessRate: 0.5,
	})
	// 20 of every 100 end in 3, 20 in 5 (n=200: 20+20 each).
	wantNotFound, want500 := int64(20), int64(20)
	if rep.Failures["not_found"] != wantNotFound || rep.Failures["http_500"] != want500 {
		t.Fatalf("failures = %v, want not_found %d, http_500 %d", rep.Failures, wantNotFound, want500)
	}
	if rep.SamplesIn != n || rep.SamplesOut != n-40 || rep.FetchAttempted != n || rep.FetchSucceeded != n-40 {
		t.Fatalf("report = in %d out %d fetch %d/%d", rep.SamplesIn, rep.SamplesOut, rep.FetchSucceeded, rep.FetchAttempted)
	}
	srv.mu.Lock()
	if srv.seen["/img/7.jpg"] != 2 || srv.seen["/img/3.jpg"] != 1 || srv.seen["/img/5.jpg"] != 3 {
		t.Errorf("requests: 7.jpg %d (want 2), 3.jpg %d (want 1: 404 is permanent), 5.jpg %d (want 3 attempts)",
			srv.seen["/img/7.jpg"], srv.seen["/img/3.jpg"], srv.seen["/img/5.jpg"])
	}
	srv.mu.Unlock()
	got := readDataset(t, out)
	if len(got) != n-40 {
		t.Fatalf("read %d samples", len(got))
	}
	for _, s := range got {
		var i int
		fmt.Sscanf(s["caption"].(string), "image %d", &i)
		if !bytes.Equal(s["url"].(*format.Image).Encoded, srv.images[fmt.Sprintf("/img/%d.jpg", i)]) {
			t.Fatalf("sample %q embeds the wrong bytes", s["caption"])
		}
	}

	// The quality gate: 80% success is below 90%, so no index.json.
	out2 := filepath.Join(dir, "gated")
	rep2, err := runConvertErr(t, &Options{
		Input: in, Output: out2, FetchAllowNets: loopbackNets, Fetch: []FetchColumn{{Column: "url"}}, FetchBaseDelay: time.Millisecond,
		FetchAttempts: 2, MinSuccessRate: 0.9,
	})
	if !errors.Is(err, ErrQualityGate) || rep2 == nil || rep2.Passed {
		t.Fatalf("gated run: err %v, report %+v", err, rep2)
	}
	if _, err := readDatasetErr(out2); err == nil {
		t.Fatal("a gated run wrote a readable index.json")
	}
}

func TestFetchResize(t *testing.T) {
	dir := t.TempDir()
	big := makeJPEG(t, 1, 200, 100)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(big) }))
	defer hs.Close()
	in := filepath.Join(dir, "m.csv")
	writeFile(t, in, []byte("url\n"+hs.URL+"/a.jpg\n"+hs.URL+"/b.jpg\n"))
	out := filepath.Join(dir, "out")
	rep := runConvert(t, &Options{Input: in, Output: out, FetchAllowNets: loopbackNets, Fetch: []FetchColumn{{Column: "url"}}, MaxSide: 50})
	if rep.Columns[0].Encoding != "jpeg" {
		t.Fatalf("fetched column encoding %q, want jpeg", rep.Columns[0].Encoding)
	}
	for _, s := range readDataset(t, out) {
		cfg, _, err := image.DecodeConfig(bytes.NewReader(s["url"].(*format.Image).Encoded))
		if err != nil || cfg.Width != 50 || cfg.Height != 25 {
			t.Fatalf("resized image: %v %dx%d, want 50x25", err, cfg.Width, cfg.Height)
		}
	}
}
