package storage

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"strings"
)

// Opener opens a Bucket rooted at u (scheme, host and path prefix).
type Opener func(ctx context.Context, u *url.URL) (Bucket, error)

// Registry maps URL schemes to Openers. The zero value is an empty registry
// ready to use. A Registry is built once at start-up (see cmd/sluice) and is
// safe for concurrent Open calls once no more schemes are registered.
type Registry struct {
	openers map[string]Opener
}

// Register adds an Opener for scheme (lower case, without "://"). Registering
// a scheme twice is a programming error and panics.
func (r *Registry) Register(scheme string, o Opener) {
	if r.openers == nil {
		r.openers = make(map[string]Opener)
	}
	scheme = strings.ToLower(scheme)
	if _, dup := r.openers[scheme]; dup {
		panic(fmt.Sprintf("storage: scheme %q registered twice", scheme))
	}
	r.openers[scheme] = o
}

// Schemes returns the registered schemes in sorted order.
func (r *Registry) Schemes() []string {
	s := make([]string, 0, len(r.openers))
	for k := range r.openers {
		s = append(s, k)
	}
	sort.Strings(s)
	return s
}

// Open opens the Bucket named by rawURL. A string without a scheme is a
// local path and opens with the "file" scheme.
func (r *Registry) Open(ctx context.Context, rawURL string) (Bucket, error) {
	u, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	o, ok := r.openers[u.Scheme]
	if !ok {
		return nil, fmt.Errorf("storage: open %q: unsupported scheme %q (supported: %s)",
			rawURL, u.Scheme, strings.Join(r.Schemes(), ", "))
	}
	return o(ctx, u)
}

// ParseURL parses a store URL. Plain paths (no "scheme://") become file URLs.
func ParseURL(rawURL string) (*url.URL, error) {
	if !strings.Contains(rawURL, "://") {
		return &url.URL{Scheme: "file", Path: rawURL}, nil
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("storage: bad URL %q: %w", rawURL, err)
	}
	u.Scheme = strings.ToLower(u.Scheme)
	return u, nil
}
