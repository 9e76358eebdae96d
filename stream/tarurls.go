package stream

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/sluicedata/sluice/storage"
)

// maxTarURLs bounds how many shard URLs one tar dataset spec may expand to.
const maxTarURLs = 1 << 20

// ErrBadTarSpec matches errors for a malformed tar dataset spec (brace
// pattern, URL list).
var ErrBadTarSpec = errors.New("stream: bad tar dataset spec")

// ExpandTarURLs expands a WebDataset-style shard spec into its URLs, in
// order: "::" separates specs, and each may hold brace groups as the
// braceexpand package WebDataset uses reads them: "{a,b}" alternatives,
// "{000..099}" zero-padded numeric ranges (with an optional "..step"),
// "{a..e}" letter ranges, nested and in sequence. At most maxTarURLs URLs.
func ExpandTarURLs(spec string) ([]string, error) { return expandTarURLs(spec, maxTarURLs) }

// expandTarURLs is ExpandTarURLs with at most limit URLs.
func expandTarURLs(spec string, limit int) ([]string, error) {
	var out []string
	for _, part := range strings.Split(spec, "::") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		urls, err := expandBraces(part, limit-len(out))
		if err != nil {
			return nil, fmt.Errorf("%w: %q: %v", ErrBadTarSpec, part, err)
		}
		out = append(out, urls...)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: %q names no shards", ErrBadTarSpec, spec)
	}
	return out, nil
}

// expandBraces expands s, failing past limit results.
func expandBraces(s string, limit int) ([]string, error) {
	open := -1
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '{':
			if depth == 0 {
				open = i
			}
			depth++
		case '}':
			if depth == 0 {
				return nil, fmt.Errorf("unmatched '}' at %d", i)
			}
			depth--
			if depth > 0 {
				continue
			}
			alts, err := braceAlternatives(s[open+1:i], limit)
			if err != nil {
				return nil, err
			}
			rest, err := expandBraces(s[i+1:], limit)
			if err != nil {
				return nil, err
			}
			if len(alts)*len(rest) > limit {
				return nil, fmt.Errorf("expands to more than %d names", limit)
			}
			out := make([]string, 0, len(alts)*len(rest))
			for _, a := range alts {
				for _, r := range rest {
					out = append(out, s[:open]+a+r)
				}
			}
			return out, nil
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("unmatched '{' at %d", open)
	}
	return []string{s}, nil
}

// braceAlternatives expands the inside of one brace group.
func braceAlternatives(in string, limit int) ([]string, error) {
	if r, ok, err := braceRange(in, limit); ok || err != nil {
		return r, err
	}
	// Comma alternatives at depth 0, each expanded in turn.
	var parts []string
	depth, start := 0, 0
	for i := 0; i < len(in); i++ {
		switch in[i] {
		case '{':
			depth++
		case '}':
			depth--
		case ',':
			if depth == 0 {
				parts = append(parts, in[start:i])
				start = i + 1
			}
		}
	}
	parts = append(parts, in[start:])
	if len(parts) == 1 {
		// "{x}" is kept literally, as braceexpand does.
		sub, err := expandBraces(in, limit)
		if err != nil {
			return nil, err
		}
		for i := range sub {
			sub[i] = "{" + sub[i] + "}"
		}
		return sub, nil
	}
	var out []string
	for _, p := range parts {
		sub, err := expandBraces(p, limit-len(out))
		if err != nil {
			return nil, err
		}
		out = append(out, sub...)
		if len(out) > limit {
			return nil, fmt.Errorf("expands to more than %d names", limit)
		}
	}
	return out, nil
}

// braceRange expands "A..B" or "A..B..STEP" (numbers or single letters).
func braceRange(in string, limit int) ([]string, bool, error) {
	f := strings.Split(in, "..")
	if len(f) != 2 && len(f) != 3 {
		return nil, false, nil
	}
	step := int64(1)
	if len(f) == 3 {
		n, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			return nil, false, nil
		}
		if n == 0 {
			return nil, true, errors.New("range step 0")
		}
		step = max(n, -n)
	}
	a, errA := strconv.ParseInt(f[0], 10, 64)
	b, errB := strconv.ParseInt(f[1], 10, 64)
	if errA == nil && errB == nil {
		width := 0
		if padded(f[0]) || padded(f[1]) {
			width = max(len(f[0]), len(f[1]))
		}
		dir := int64(1)
		if b < a {
			dir = -1
		}
		if n := (b-a)*dir/step + 1; n > int64(limit) || n < 0 {
			return nil, true, fmt.Errorf("range %q has more than %d names", in, limit)
		}
		var out []string
		for v := a; (dir > 0 && v <= b) || (dir < 0 && v >= b); v += dir * step {
			s := strconv.FormatInt(max(v, -v), 10)
			if w := width; v < 0 {
				s = "-" + strings.Repeat("0", max(0, w-len(s)-1)) + s
			} else if len(s) < w {
				s = strings.Repeat("0", w-len(s)) + s
			}
			out = append(out, s)
		}
		return out, true, nil
	}
	if len(f[0]) == 1 && len(f[1]) == 1 && isLetter(f[0][0]) && isLetter(f[1][0]) {
		a, b := int64(f[0][0]), int64(f[1][0])
		dir := int64(1)
		if b < a {
			dir = -1
		}
		var out []string
		for v := a; (dir > 0 && v <= b) || (dir < 0 && v >= b); v += dir * step {
			out = append(out, string(rune(v)))
		}
		return out, true, nil
	}
	return nil, false, nil
}

// padded reports whether a range endpoint is written zero-padded ("007",
// "-07").
func padded(s string) bool {
	s = strings.TrimPrefix(s, "-")
	return len(s) > 1 && s[0] == '0'
}

func isLetter(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }

// isTarName reports whether a shard URL names a tar archive.
func isTarName(u string) bool { return strings.HasSuffix(strings.ToLower(u), ".tar") }

// isCompressedTarName reports whether a shard URL names a compressed tar
// archive (webdataset reads "shard-000000.tar.gz" through Python's tarfile).
func isCompressedTarName(u string) bool {
	u = strings.ToLower(u)
	for _, ext := range []string{".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".tar.zst", ".tzst"} {
		if strings.HasSuffix(u, ext) {
			return true
		}
	}
	return false
}

// compressedTarError says why a compressed tar shard cannot be streamed
// and what to do instead.
func compressedTarError(u string) error {
	return fmt.Errorf("%w: %q is a compressed tar: Sluice streams uncompressed .tar shards, "+
		"read in place by byte range (decompress each shard, e.g. gunzip, then run sluice index)", ErrBadTarSpec, redactTarURL(u))
}

// tarSpec is a tar dataset: the store root its shards are under and their
// keys relative to it, in dataset order.
type tarSpec struct {
	spec string // as given
	root string // URL (or path) of the common directory
	keys []string
}

// parseTarSpec returns the tar dataset remote names, or nil when remote is
// not a list of .tar URLs (a dataset directory, say).
func parseTarSpec(remote string) (*tarSpec, error) {
	if !strings.Contains(remote, "::") && !strings.Contains(remote, "{") && !isTarName(withoutQuery(remote)) {
		if isCompressedTarName(withoutQuery(remote)) {
			return nil, compressedTarError(remote)
		}
		return nil, nil
	}
	urls, err := ExpandTarURLs(remote)
	if err != nil {
		return nil, err
	}
	// A query (store options: "?endpoint=…&region=…") applies to the
	// store, not the key; every URL must carry the same one.
	query := ""
	for i, u := range urls {
		base, q, ok := strings.Cut(u, "?")
		if !ok || !strings.Contains(u, "://") {
			if i > 0 && query != "" {
				return nil, fmt.Errorf("%w: %q and %q give different store options", ErrBadTarSpec, redactTarURL(urls[0]), redactTarURL(u))
			}
			continue
		}
		if i > 0 && q != query {
			return nil, fmt.Errorf("%w: %q and %q give different store options", ErrBadTarSpec, redactTarURL(urls[0]), redactTarURL(u))
		}
		query, urls[i] = q, base
	}
	for _, u := range urls {
		if !isTarName(u) {
			if isCompressedTarName(u) {
				return nil, compressedTarError(u)
			}
			if len(urls) == 1 {
				return nil, nil
			}
			return nil, fmt.Errorf("%w: %q is not a .tar shard", ErrBadTarSpec, u)
		}
	}
	root, keys, err := splitRoot(urls)
	if err != nil {
		return nil, err
	}
	if query != "" {
		root += "?" + query
	}
	return &tarSpec{spec: remote, root: root, keys: keys}, nil
}

func redactTarURL(u string) string { return storage.RedactURL(u) }

// withoutQuery returns a store URL without its "?…" options.
func withoutQuery(u string) string {
	if strings.Contains(u, "://") {
		u, _, _ = strings.Cut(u, "?")
	}
	return u
}

// splitRoot returns the deepest directory holding every URL and each URL's
// key under it. The root keeps at least the scheme and bucket.
func splitRoot(urls []string) (string, []string, error) {
	root := urls[0][:strings.LastIndexByte(urls[0], '/')+1]
	for _, u := range urls[1:] {
		for !strings.HasPrefix(u, root) {
			root = root[:strings.LastIndexByte(root[:len(root)-1], '/')+1]
			if root == "" {
				break
			}
		}
	}
	min := 0
	if i := strings.Index(urls[0], "://"); i >= 0 {
		min = i + 3
		if j := strings.IndexByte(urls[0][min:], '/'); j >= 0 {
			min += j + 1
		} else {
			min = len(urls[0])
		}
	}
	if root == "" && min == 0 {
		// Relative names in the working directory.
		return ".", append([]string(nil), urls...), nil
	}
	if len(root) < min {
		return "", nil, fmt.Errorf("%w: shards %q and others are not in one bucket", ErrBadTarSpec, urls[0])
	}
	keys := make([]string, len(urls))
	for i, u := range urls {
		keys[i] = u[len(root):]
		if keys[i] == "" || strings.HasSuffix(keys[i], "/") {
			return "", nil, fmt.Errorf("%w: %q names no file", ErrBadTarSpec, u)
		}
	}
	r := strings.TrimSuffix(root, "/")
	if r == "" {
		r = "/"
	}
	if strings.HasSuffix(r, ":/") { // "s3://" never; "file:/" style
		r = root
	}
	return r, keys, nil
}
