package storagetest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"
)

// Shaping is what a ShapingProxy does to every request: it waits Latency
// before forwarding (the time to first byte), then sends response bodies
// through one link of Bandwidth bytes/s that carries one body at a time,
// in the order they are ready (a FIFO link, as package sim models a node's
// connection to its store).
type Shaping struct {
	// Latency delays every request before it is forwarded.
	Latency time.Duration
	// Bandwidth is the link's rate in bytes/s; 0 means unlimited.
	Bandwidth float64
}

// ShapingProxy is a FaultProxy behind a latency and bandwidth shaper: a
// reverse proxy on 127.0.0.1 that forwards to a real server, shapes every
// response, counts requests and body bytes, and still injects the faults
// of its FaultProxy. It is safe for concurrent use.
type ShapingProxy struct {
	// URL is the shaping proxy's base URL.
	URL string
	// Faults is the proxy behind the shaper (Inject works as usual; its
	// own URL skips the shaping).
	Faults *FaultProxy

	shape Shaping
	srv   *httptest.Server
	link  chan struct{} // held while a body is sent

	mu       sync.Mutex
	requests map[string]int // by method
	bytes    int64          // response body bytes sent
	log      []string       // "METHOD path" in arrival order
	timings  []Timing       // in arrival order
}

// Timing is when one request reached the proxy, when its body began to go
// through the link (zero without a body), and when it was done.
type Timing struct {
	Method, Path           string
	Arrived, Linked, Ended time.Time
}

// NewShapingProxy starts a shaping proxy forwarding to target (a base URL
// such as "http://127.0.0.1:9000"). Close stops it.
func NewShapingProxy(target string, s Shaping) (*ShapingProxy, error) {
	if s.Latency < 0 || s.Bandwidth < 0 {
		return nil, fmt.Errorf("shaping proxy: latency %s and bandwidth %g must not be negative", s.Latency, s.Bandwidth)
	}
	fp, err := NewFaultProxy(target)
	if err != nil {
		return nil, err
	}
	p := &ShapingProxy{Faults: fp, shape: s, link: make(chan struct{}, 1), requests: make(map[string]int)}
	p.srv = httptest.NewServer(p)
	p.URL = p.srv.URL
	return p, nil
}

// Close stops the proxy and its FaultProxy.
func (p *ShapingProxy) Close() {
	p.srv.CloseClientConnections()
	p.srv.Close()
	p.Faults.Close()
}

// Requests returns the number of requests received with method ("" for
// all).
func (p *ShapingProxy) Requests(method string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if method != "" {
		return p.requests[method]
	}
	n := 0
	for _, v := range p.requests {
		n += v
	}
	return n
}

// Bytes returns the response body bytes sent to clients.
func (p *ShapingProxy) Bytes() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.bytes
}

// Log returns "METHOD path" for every request received, in arrival
// order.
func (p *ShapingProxy) Log() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.log...)
}

// Timings returns every request's Timing, in arrival order (a request
// still being served has a zero Ended).
func (p *ShapingProxy) Timings() []Timing {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Timing(nil), p.timings...)
}

// ServeHTTP implements http.Handler.
func (p *ShapingProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.requests[r.Method]++
	p.log = append(p.log, r.Method+" "+r.URL.Path)
	i := len(p.timings)
	p.timings = append(p.timings, Timing{Method: r.Method, Path: r.URL.Path, Arrived: time.Now()})
	p.mu.Unlock()
	sw := &shapedWriter{ResponseWriter: w, p: p, ctx: r.Context()}
	defer func() {
		sw.done()
		p.mu.Lock()
		p.timings[i].Linked, p.timings[i].Ended = sw.start, time.Now()
		p.mu.Unlock()
	}()
	if err := sleepCtx(r.Context(), p.shape.Latency); err != nil {
		return
	}
	p.Faults.ServeHTTP(sw, r)
}

// shapedWriter paces a response body through the proxy's link.
type shapedWriter struct {
	http.ResponseWriter
	p     *ShapingProxy
	ctx   context.Context
	held  bool
	start time.Time
	sent  int64
}

// chunk is the most bytes written between two pacing sleeps.
const chunk = 16 << 10

func (w *shapedWriter) Write(b []byte) (int, error) {
	if !w.held {
		select {
		case w.p.link <- struct{}{}:
		case <-w.ctx.Done():
			return 0, w.ctx.Err()
		}
		w.held, w.start = true, time.Now()
	}
	written := 0
	for len(b) > 0 {
		n := min(len(b), chunk)
		m, err := w.ResponseWriter.Write(b[:n])
		written += m
		w.sent += int64(m)
		w.p.mu.Lock()
		w.p.bytes += int64(m)
		w.p.mu.Unlock()
		if err != nil {
			return written, err
		}
		b = b[n:]
		if bw := w.p.shape.Bandwidth; bw > 0 {
			due := w.start.Add(time.Duration(float64(w.sent) / bw * float64(time.Second)))
			if err := sleepCtx(w.ctx, time.Until(due)); err != nil {
				return written, err
			}
		}
	}
	return written, nil
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *shapedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *shapedWriter) done() {
	if w.held {
		<-w.p.link
		w.held = false
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
