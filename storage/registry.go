package storage

import (
	"context"
	"errors"
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
			RedactURL(rawURL), u.Scheme, strings.Join(r.Schemes(), ", "))
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
		// url.Error repeats the URL: keep only its reason.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("storage: bad URL %q: %w", RedactURL(rawURL), err)
	}
	u.Scheme = strings.ToLower(u.Scheme)
	return u, nil
}

// RedactURL returns rawURL fit for an error message or a log: the
// password of user information (user:password@) and the values of query
// parameters that carry credentials (SAS signatures, presigned S3 URLs)
// are replaced by "xxxxx". A string that does not parse as a URL has any
// "//user:password@" part redacted by hand.
func RedactURL(rawURL string) string {
	if !strings.Contains(rawURL, "://") {
		return rawURL
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		scheme, rest, _ := strings.Cut(rawURL, "://")
		host, path, slash := strings.Cut(rest, "/")
		if at := strings.LastIndex(host, "@"); at >= 0 {
			user := host[:at]
			if name, _, ok := strings.Cut(user, ":"); ok {
				host = name + ":xxxxx" + host[at:]
			}
		}
		if slash {
			return scheme + "://" + host + "/" + path
		}
		return scheme + "://" + host
	}
	if u.RawQuery != "" {
		q := u.Query()
		changed := false
		for k := range q {
			switch strings.ToLower(k) {
			case "sig", "signature", "x-amz-signature", "x-amz-credential", "x-amz-security-token",
				"x-goog-signature", "x-goog-credential", "token", "access_token", "password", "secret":
				q.Set(k, "xxxxx")
				changed = true
			case "endpoint":
				if r := RedactURL(q.Get(k)); r != q.Get(k) {
					q.Set(k, r)
					changed = true
				}
			}
		}
		if changed {
			u.RawQuery = q.Encode()
		}
	}
	return u.Redacted()
}
