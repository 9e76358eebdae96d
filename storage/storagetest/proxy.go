package storagetest

import (
	"cmp"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
)

// ProxyFaultKind says what a FaultProxy does to a matching request.
type ProxyFaultKind int

// Kinds of ProxyFault.
const (
	// Status answers with ProxyFault.Status (and Retry-After and body)
	// without forwarding the request.
	Status ProxyFaultKind = iota + 1
	// Reset forwards the request, sends the response headers and
	// AfterBytes bytes of the body, then resets the TCP connection.
	Reset
	// Truncate is Reset with an orderly close: the body ends early after
	// AfterBytes bytes, short of its Content-Length.
	Truncate
	// Stall sends the headers and AfterBytes bytes of the body, then sends
	// nothing more until the client gives up or the proxy closes.
	Stall
	// Corrupt sends the whole response, its length unchanged, with the
	// bits of the body's byte at offset AfterBytes inverted: damage in
	// transit that no transport error reveals.
	Corrupt
)

// String returns the fault kind's lowercase name.
func (k ProxyFaultKind) String() string {
	switch k {
	case Status:
		return "status"
	case Reset:
		return "reset"
	case Truncate:
		return "truncate"
	case Stall:
		return "stall"
	case Corrupt:
		return "corrupt"
	}
	return "ProxyFaultKind(" + strconv.Itoa(int(k)) + ")"
}

// ProxyFault is one failure a FaultProxy injects.
type ProxyFault struct {
	// Kind is what happens.
	Kind ProxyFaultKind
	// Method restricts the fault to requests with this method (GET, HEAD,
	// PUT...); empty matches any.
	Method string
	// Match, when not nil, restricts the fault further to requests for
	// which it reports true.
	Match func(*http.Request) bool
	// Times is the number of matching requests to fail; zero means all.
	Times int
	// Status is the HTTP status code of a Status fault (e.g. 500, 503,
	// 429).
	Status int
	// RetryAfter is sent as the Retry-After header of a Status fault when
	// not empty (seconds or an HTTP date).
	RetryAfter string
	// Body is the response body of a Status fault (for S3-like servers an
	// XML error such as SlowDownBody).
	Body string
	// AfterBytes is the number of response body bytes forwarded before a
	// Reset, Truncate or Stall, or before the byte a Corrupt fault
	// inverts. A response whose body is not longer than that is forwarded
	// whole and counts as no fault (though it uses up one of Times).
	AfterBytes int64
}

// SlowDownBody is an S3-style XML error body for a 503 Status fault.
const SlowDownBody = `<?xml version="1.0" encoding="UTF-8"?>
<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`

// FaultProxy is an HTTP reverse proxy, on 127.0.0.1, that forwards to a
// real server and injects faults into chosen requests. Point a client at
// URL instead of the server. The Host header is passed through unchanged,
// so signed requests (S3 SigV4) stay valid. It is safe for concurrent use.
type FaultProxy struct {
	// URL is the proxy's base URL ("http://127.0.0.1:port").
	URL string

	target    *url.URL
	srv       *httptest.Server
	transport *http.Transport
	stop      chan struct{}
	stopOnce  sync.Once

	// mu guards faults, host and the counters.
	mu       sync.Mutex
	host     string
	faults   []*activeProxyFault
	requests int
	injected map[ProxyFaultKind]int
}

type activeProxyFault struct {
	ProxyFault
	left int // <0: unlimited
}

// NewFaultProxy starts a proxy forwarding to target (a base URL such as
// "http://127.0.0.1:9000"). Close stops it.
func NewFaultProxy(target string) (*FaultProxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, fmt.Errorf("fault proxy: target %q: %w", target, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("fault proxy: target %q: scheme must be http or https", target)
	}
	p := &FaultProxy{
		target: u,
		transport: &http.Transport{
			Proxy:               nil,
			DisableCompression:  true,
			MaxIdleConnsPerHost: 64,
		},
		stop:     make(chan struct{}),
		injected: make(map[ProxyFaultKind]int),
	}
	p.srv = httptest.NewServer(p)
	p.URL = p.srv.URL
	return p, nil
}

// Close stops the proxy, releasing stalled responses.
func (p *FaultProxy) Close() {
	p.stopOnce.Do(func() { close(p.stop) })
	p.srv.CloseClientConnections()
	p.srv.Close()
	p.transport.CloseIdleConnections()
}

// SetHost makes the proxy send host as the Host of the requests it
// forwards, for a server that routes by Host (fake-gcs-server's public
// object URLs) and unsigned requests; "" passes the client's through.
func (p *FaultProxy) SetHost(host string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.host = host
}

// Inject adds faults; the first matching fault applies to each request.
func (p *FaultProxy) Inject(faults ...ProxyFault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, f := range faults {
		left := f.Times
		if left == 0 {
			left = -1
		}
		p.faults = append(p.faults, &activeProxyFault{ProxyFault: f, left: left})
	}
}

// Clear removes every fault.
func (p *FaultProxy) Clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults = nil
}

// Requests returns the number of requests the proxy has received.
func (p *FaultProxy) Requests() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.requests
}

// Injected returns how many faults of kind k the proxy has injected.
func (p *FaultProxy) Injected(k ProxyFaultKind) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.injected[k]
}

func (p *FaultProxy) take(r *http.Request) *ProxyFault {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.requests++
	for _, f := range p.faults {
		if f.left == 0 || (f.Method != "" && !strings.EqualFold(f.Method, r.Method)) {
			continue
		}
		if f.Match != nil && !f.Match(r) {
			continue
		}
		if f.left > 0 {
			f.left--
		}
		if f.Kind == Status {
			p.injected[f.Kind]++
		}
		c := f.ProxyFault
		return &c
	}
	return nil
}

// hopHeaders are connection-level headers a proxy must not forward.
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// ServeHTTP implements http.Handler.
func (p *FaultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f := p.take(r)
	if f != nil && f.Kind == Status {
		_, _ = io.Copy(io.Discard, r.Body) // let the client finish sending
		if f.RetryAfter != "" {
			w.Header().Set("Retry-After", f.RetryAfter)
		}
		if f.Body != "" {
			w.Header().Set("Content-Type", "application/xml")
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(f.Body)))
		w.WriteHeader(f.Status)
		if r.Method != http.MethodHead {
			_, _ = io.WriteString(w, f.Body)
		}
		return
	}

	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.URL.Scheme = p.target.Scheme
	out.URL.Host = p.target.Host
	out.URL.Path = strings.TrimSuffix(p.target.Path, "/") + r.URL.Path
	if r.URL.RawPath != "" {
		out.URL.RawPath = strings.TrimSuffix(p.target.EscapedPath(), "/") + r.URL.RawPath
	}
	p.mu.Lock()
	out.Host = cmp.Or(p.host, r.Host) // by default, keep the signed Host
	p.mu.Unlock()
	for _, h := range hopHeaders {
		out.Header.Del(h)
	}
	if r.ContentLength == 0 {
		out.Body = nil
	}
	resp, err := p.transport.RoundTrip(out)
	if err != nil {
		http.Error(w, "fault proxy: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for _, h := range hopHeaders {
		resp.Header.Del(h)
	}
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	if resp.ContentLength >= 0 {
		w.Header().Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
	}
	w.WriteHeader(resp.StatusCode)
	if f == nil {
		_, _ = io.Copy(w, resp.Body)
		return
	}
	_, _ = io.Copy(w, io.LimitReader(resp.Body, f.AfterBytes))
	one := make([]byte, 1)
	if n, _ := io.ReadFull(resp.Body, one); n == 0 {
		// The body ended at or before the fault's point: the client has
		// the whole response, and breaking the connection now would only
		// hit its next request (a stall would hold a pooled connection).
		return
	}
	p.mu.Lock()
	p.injected[f.Kind]++
	p.mu.Unlock()
	if f.Kind == Corrupt {
		// The byte read past the fault's point goes out inverted, the
		// rest as it comes.
		_, _ = w.Write([]byte{^one[0]})
		_, _ = io.Copy(w, resp.Body)
		return
	}
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	switch f.Kind {
	case Reset:
		conn, _, err := rc.Hijack()
		if err != nil {
			panic(http.ErrAbortHandler)
		}
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // close with RST
		}
		_ = conn.Close()
	case Truncate:
		panic(http.ErrAbortHandler) // closes the connection short of Content-Length
	case Stall:
		select {
		case <-r.Context().Done():
		case <-p.stop:
		}
		panic(http.ErrAbortHandler)
	}
}

// Rate returns a ProxyFault.Match that picks each request with
// probability p, from a generator seeded with seed (reproducible for one
// sequence of requests). Match is called under the proxy's lock, so the
// generator needs none of its own.
func Rate(p float64, seed uint64) func(*http.Request) bool {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	return func(*http.Request) bool { return rng.Float64() < p }
}
