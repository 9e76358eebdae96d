// Package version holds the Sluice release version, the one number the
// binary (`sluice --version`), the Python package (sluice.__version__),
// the wheel and the agent handshake report. The number lives in the file
// VERSION next to this source (embedded at build time); the Python package
// carries the same number in python/sluice/_version.py, and a test keeps
// the two equal.
package version

import (
	_ "embed"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

//go:embed VERSION
var raw string

// Number returns the release version, e.g. "0.1.0".
func Number() string { return strings.TrimSpace(raw) }

// Software returns the name and version a component announces in a
// handshake, e.g. "sluice/0.1.0".
func Software() string { return "sluice/" + Number() }

// Long returns the line `sluice --version` prints: the version, the Go
// release and, when the build recorded it, the source revision.
func Long() string {
	s := fmt.Sprintf("sluice %s (%s %s/%s", Number(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	if info, ok := debug.ReadBuildInfo(); ok {
		var rev, dirty string
		for _, kv := range info.Settings {
			switch kv.Key {
			case "vcs.revision":
				rev = kv.Value
			case "vcs.modified":
				if kv.Value == "true" {
					dirty = "+dirty"
				}
			}
		}
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if rev != "" {
			s += ", " + rev + dirty
		}
	}
	return s + ")"
}
