package fetch

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// Errors of the fetch policy, matched with errors.Is.
var (
	// ErrSchemeNotAllowed: the URL's scheme is not one the policy allows
	// (only http and https are allowed by default).
	ErrSchemeNotAllowed = errors.New("URL scheme not allowed")
	// ErrBlockedAddress: the connection would go to a loopback, private,
	// link-local (cloud metadata), multicast or otherwise special address
	// that the policy does not allow.
	ErrBlockedAddress = errors.New("address not allowed")
	// ErrOutsideRoot: a local path lies outside the allowed file root.
	ErrOutsideRoot = errors.New("path outside the allowed file root")
	// ErrRedirect: a redirect the policy refuses (too many, or to a
	// scheme other than http or https).
	ErrRedirect = errors.New("redirect refused")
)

// Policy says which URLs found in the data may be fetched. Manifests are
// untrusted input: by default only http and https are fetched, and only
// from public unicast addresses. The zero value is that default.
//
// The address check is made on the address actually dialled (in the
// dialer's Control hook, after DNS resolution and for every redirect), so
// neither a hostname that resolves to a private address (DNS rebinding)
// nor a redirect to one gets through.
type Policy struct {
	// Schemes lists schemes allowed besides http and https: "s3", "gs",
	// "az", "azure" (fetched with the converter's own credentials) and
	// "file" (which needs FileRoot).
	Schemes []string
	// FileRoot, if set, allows local files (file:// URLs and absolute
	// paths) that lie under this directory; symbolic links that leave it
	// are refused. It implies the "file" scheme.
	FileRoot string
	// AllowNets lists address ranges that may be dialled although they are
	// special (loopback, private, link-local, ...), for example
	// 127.0.0.1/32 for a local test server or 10.0.0.0/8 for an internal
	// image host.
	AllowNets []netip.Prefix
	// MaxRedirects bounds the redirects followed per request; zero means
	// DefaultMaxRedirects, negative means none are followed.
	MaxRedirects int
}

// DefaultMaxRedirects is the redirect bound of a zero Policy.
const DefaultMaxRedirects = 5

// ParseNets parses a comma-separated list of CIDR prefixes or single
// addresses ("127.0.0.1/32,10.0.0.0/8,::1").
func ParseNets(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !strings.Contains(f, "/") {
			a, err := netip.ParseAddr(f)
			if err != nil {
				return nil, fmt.Errorf("fetch: bad address %q: %w", f, err)
			}
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, fmt.Errorf("fetch: bad network %q: %w", f, err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// special lists the ranges refused unless allowed: everything that is not
// a public unicast address.
var special = mustPrefixes(
	"0.0.0.0/8",         // "this" network
	"10.0.0.0/8",        // private
	"100.64.0.0/10",     // carrier-grade NAT (Alibaba's metadata service lives here)
	"127.0.0.0/8",       // loopback
	"169.254.0.0/16",    // link-local: AWS/GCP/Azure metadata 169.254.169.254
	"172.16.0.0/12",     // private
	"192.0.0.0/24",      // IETF protocol assignments
	"192.168.0.0/16",    // private
	"198.18.0.0/15",     // benchmarking
	"224.0.0.0/4",       // multicast
	"240.0.0.0/4",       // reserved, broadcast
	"::/128", "::1/128", // unspecified, loopback
	"64:ff9b::/96",   // NAT64 (maps onto IPv4, which is checked separately)
	"64:ff9b:1::/48", // local NAT64
	"fc00::/7",       // unique local (AWS's IPv6 metadata fd00:ec2::254)
	"fe80::/10",      // link-local
	"ff00::/8",       // multicast
	"2001:db8::/32",  // documentation
)

func mustPrefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// allowedAddr reports whether a connection to a may be made.
func (p *Policy) allowedAddr(a netip.Addr) bool {
	a = a.Unmap()
	for _, n := range p.AllowNets {
		if n.Contains(a) {
			return true
		}
	}
	if !a.IsValid() || a.Zone() != "" {
		return false
	}
	for _, n := range special {
		if n.Contains(a) {
			return false
		}
	}
	return true
}

// control is the dialer's Control hook: it sees the resolved address of
// every connection attempt.
func (p *Policy) control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: cannot parse dialled address %q", ErrBlockedAddress, address)
	}
	if !p.allowedAddr(ap.Addr()) {
		return fmt.Errorf("%w: %s is a loopback, private, link-local or special address (allow it with --fetch-allow-net)", ErrBlockedAddress, ap.Addr())
	}
	return nil
}

// checkHost refuses a URL host that is a literal special address before
// any connection is tried (names are checked when dialled).
func (p *Policy) checkHost(hostport string) error {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	a, err := netip.ParseAddr(strings.Trim(host, "[]"))
	if err != nil {
		return nil // a name: checked on the dialled address
	}
	if !p.allowedAddr(a) {
		return fmt.Errorf("%w: %s is a loopback, private, link-local or special address (allow it with --fetch-allow-net)", ErrBlockedAddress, a)
	}
	return nil
}

// dialer returns a dialer whose every connection passes the address check.
func (p *Policy) dialer() *net.Dialer {
	return &net.Dialer{Timeout: DefaultDialTimeout, KeepAlive: DefaultKeepAlive, Control: p.control}
}

func (p *Policy) schemeAllowed(scheme string) bool {
	switch scheme {
	case "http", "https":
		return true
	case "file":
		return p.FileRoot != ""
	}
	return slices.Contains(p.Schemes, scheme)
}

// Validate checks the policy itself: known schemes, a file root that is a
// directory when the file scheme is allowed.
func (p *Policy) Validate() error {
	for _, s := range p.Schemes {
		switch s {
		case "http", "https", "s3", "gs", "az", "azure":
		case "file":
			if p.FileRoot == "" {
				return errors.New("fetch: the file scheme needs a file root (--fetch-file-root DIR)")
			}
		default:
			return fmt.Errorf("fetch: unknown scheme %q (known: s3, gs, az, azure, file)", s)
		}
	}
	if p.FileRoot != "" {
		st, err := os.Stat(p.FileRoot)
		if err != nil {
			return fmt.Errorf("fetch: file root: %w", err)
		}
		if !st.IsDir() {
			return fmt.Errorf("fetch: file root %s is not a directory", p.FileRoot)
		}
	}
	return nil
}

// relToRoot maps an absolute local path to a path relative to the file
// root, refusing paths that leave it lexically ("/root/../etc/passwd").
// Symbolic links are refused later, when the file is opened through an
// os.Root.
func (p *Policy) relToRoot(path string) (string, error) {
	root, err := filepath.Abs(p.FileRoot)
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(root, filepath.Clean(path))
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return "", fmt.Errorf("%w: %s is not under %s", ErrOutsideRoot, path, root)
	}
	return rel, nil
}
