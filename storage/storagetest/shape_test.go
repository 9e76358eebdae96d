package storagetest

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// The shaper only ever delays: a body of n bytes takes at least latency +
// n/bandwidth, two at once at least latency + 2n/bandwidth (one link), and
// the counters are exact.
func TestShapingProxy(t *testing.T) {
	body := bytes.Repeat([]byte("x"), 100_000)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(body)
	}))
	defer backend.Close()
	const lat = 30 * time.Millisecond
	const bw = 1e6 // 100 ms per body
	p, err := NewShapingProxy(backend.URL, Shaping{Latency: lat, Bandwidth: bw})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	get := func(path string) []byte {
		resp, err := http.Get(p.URL + path)
		if err != nil {
			t.Error(err)
			return nil
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Error(err)
		}
		return b
	}
	start := time.Now()
	if b := get("/a"); !bytes.Equal(b, body) {
		t.Fatalf("body of %d bytes, want %d", len(b), len(body))
	}
	if d := time.Since(start); d < lat+100*time.Millisecond {
		t.Errorf("one body in %s, less than latency + size/bandwidth", d)
	}
	start = time.Now()
	var wg sync.WaitGroup
	for _, path := range []string{"/b", "/c"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			get(path)
		}()
	}
	wg.Wait()
	if d := time.Since(start); d < lat+200*time.Millisecond {
		t.Errorf("two bodies at once in %s, less than latency + 2×size/bandwidth", d)
	}
	if n := p.Requests(http.MethodGet); n != 3 {
		t.Errorf("%d GETs, want 3", n)
	}
	if n := p.Bytes(); n != 3*int64(len(body)) {
		t.Errorf("%d bytes, want %d", n, 3*len(body))
	}
	if g := p.Log(); len(g) != 3 || g[0] != "GET /a" {
		t.Errorf("log %v", g)
	}
	// Faults still apply behind the shaper.
	p.Faults.Inject(ProxyFault{Kind: Status, Status: 503, Times: 1})
	resp, err := http.Get(p.URL + "/d")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 {
		t.Errorf("status %d, want the injected 503", resp.StatusCode)
	}
	if _, err := NewShapingProxy(backend.URL, Shaping{Latency: -1}); err == nil {
		t.Error("negative latency accepted")
	}
}
