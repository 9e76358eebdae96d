package fetch_test

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicedata/sluice/convert/fetch"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/filestore"
	"github.com/sluicedata/sluice/storage/httpstore"
)

// loopback allows the 127.0.0.1 test servers.
var loopback = fetch.Policy{AllowNets: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}

func registry() *storage.Registry {
	r := &storage.Registry{}
	r.Register("http", httpstore.Open)
	return r
}

func TestRetriesAndReasons(t *testing.T) {
	var mu sync.Mutex
	hits := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.URL.Path]++
		n := hits[r.URL.Path]
		mu.Unlock()
		switch r.URL.Path {
		case "/flaky":
			if n < 3 {
				w.Header().Set("Retry-After", "0")
				http.Error(w, "busy", http.StatusServiceUnavailable)
				return
			}
			w.Write([]byte("ok"))
		case "/big":
			w.Write(make([]byte, 2048))
		case "/forbidden":
			http.Error(w, "no", http.StatusForbidden)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	f, err := fetch.New(&fetch.Options{Registry: registry(), Policy: loopback, BaseDelay: time.Millisecond, MaxBytes: 1024, Attempts: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx := context.Background()
	data, err := f.Fetch(ctx, srv.URL+"/flaky")
	if err != nil || string(data) != "ok" {
		t.Fatalf("flaky: %q, %v", data, err)
	}
	for path, reason := range map[string]string{"/missing": "not_found", "/forbidden": "forbidden", "/big": "too_large"} {
		_, err := f.Fetch(ctx, srv.URL+path)
		var fe *fetch.Error
		if !errors.As(err, &fe) || fe.Reason != reason || fetch.Reason(err) != reason {
			t.Errorf("%s: err %v, want reason %s", path, err, reason)
		}
		if fe != nil && fe.Attempts != 1 {
			t.Errorf("%s: %d attempts; permanent errors must not be retried", path, fe.Attempts)
		}
	}
	if _, err := f.Fetch(ctx, "not a url"); fetch.Reason(err) != "bad_url" {
		t.Errorf("bad URL: %v", err)
	}
	fetched, _, retries := f.Stats()
	if fetched != 1 || retries != 2 {
		t.Errorf("stats: fetched %d retries %d, want 1 and 2", fetched, retries)
	}
}

func TestLocalPaths(t *testing.T) {
	reg := &storage.Registry{}
	reg.Register("file", filestore.Open)
	dir := t.TempDir()
	f, err := fetch.New(&fetch.Options{Registry: reg, Policy: fetch.Policy{FileRoot: dir}})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := filepath.Join(dir, "x.bin")
	if err := os.WriteFile(p, []byte("local"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{p, "file://" + p} {
		if b, err := f.Fetch(context.Background(), u); err != nil || string(b) != "local" {
			t.Errorf("Fetch(%q) = %q, %v", u, b, err)
		}
	}
	if _, err := f.Fetch(context.Background(), "relative/x.bin"); fetch.Reason(err) != "bad_url" {
		t.Errorf("relative path: %v", err)
	}
	if fetched, _, _ := f.Stats(); fetched != 2 {
		t.Errorf("fetched %d local files, want 2", fetched)
	}
}

func TestPerHostLimit(t *testing.T) {
	var inFlight, peak atomic.Int64
	release := make(chan struct{})
	arrived := make(chan struct{}, 100)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		arrived <- struct{}{}
		<-release
		inFlight.Add(-1)
		w.Write([]byte("x"))
	}))
	defer srv.Close()
	f, err := fetch.New(&fetch.Options{Registry: registry(), Policy: loopback, PerHost: 3, Concurrency: 50})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := f.Fetch(context.Background(), srv.URL+"/o"); err != nil {
				t.Error(err)
			}
		}()
	}
	for range 3 {
		<-arrived
	}
	// Three requests are in the handler; release them one at a time.
	for range 10 {
		release <- struct{}{}
		if i := len(arrived); i > 0 {
			<-arrived
		}
	}
	wg.Wait()
	if p := peak.Load(); p > 3 {
		t.Fatalf("peak %d requests in flight to one host, limit 3", p)
	}
}

func TestImageTransform(t *testing.T) {
	img := image.NewRGBA(image.Rect(0, 0, 300, 120))
	for x := range 300 {
		img.Set(x, 5, color.RGBA{200, 10, 10, 255})
	}
	var pngBuf, jpgBuf bytes.Buffer
	if err := png.Encode(&pngBuf, img); err != nil {
		t.Fatal(err)
	}
	if err := jpeg.Encode(&jpgBuf, img, nil); err != nil {
		t.Fatal(err)
	}
	tr, err := fetch.ImageTransform(100, 80, false)
	if err != nil {
		t.Fatal(err)
	}
	out, err := tr(pngBuf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	cfg, format, err := image.DecodeConfig(bytes.NewReader(out))
	if err != nil || format != "jpeg" || cfg.Width != 100 || cfg.Height != 40 {
		t.Fatalf("resized: %v %s %dx%d", err, format, cfg.Width, cfg.Height)
	}
	// A JPEG that fits is kept as it is.
	keep, err := fetch.ImageTransform(1000, 80, false)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := keep(jpgBuf.Bytes()); err != nil || !bytes.Equal(out, jpgBuf.Bytes()) {
		t.Fatalf("small JPEG changed: %v", err)
	}
	if _, err := tr([]byte("not an image")); err == nil {
		t.Fatal("garbage decoded")
	}
	if _, err := fetch.ImageTransform(0, 0, true); err == nil {
		t.Fatal("quality 0 accepted")
	}
}
