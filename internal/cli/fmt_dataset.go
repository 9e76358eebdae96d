package cli

import (
	"fmt"
	"net/url"
	"strings"
)

// localDatasetDir resolves a DIR argument of the format commands (inspect,
// dump, verify, merge). Today these read local directories: a plain path
// or a file:// URL. Remote URLs are recognised and refused with a clear
// message; they will resolve through e.registry once the commands read
// through storage.Bucket.
func localDatasetDir(e *env, arg string) (string, error) {
	if !strings.Contains(arg, "://") {
		return arg, nil
	}
	u, err := url.Parse(arg)
	if err != nil {
		return "", fmt.Errorf("bad dataset URL %q: %w", arg, err)
	}
	if u.Scheme == "file" {
		if u.Host != "" && u.Host != "localhost" {
			return "", fmt.Errorf("file URL %q names a host", arg)
		}
		return u.Path, nil
	}
	known := false
	for _, s := range e.registry.Schemes() {
		if s == u.Scheme {
			known = true
		}
	}
	if known {
		return "", fmt.Errorf("%s: this command reads local directories only; copy the dataset first (sluice cp)", arg)
	}
	return "", fmt.Errorf("%s: unknown URL scheme %q (this command reads local directories)", arg, u.Scheme)
}
