package depcheck

import (
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const mod = "github.com/sluicedata/sluice/"

// rule restricts the transitive imports of the packages matching pattern.
type rule struct {
	// pattern is a go list pattern relative to the module root.
	pattern string
	// stdlibOnly forbids every package outside the standard library and
	// the module packages in allowedModule.
	stdlibOnly bool
	// allowedModule lists module packages (path prefixes relative to the
	// module root) the guarded packages may depend on.
	allowedModule []string
	// allowedExternal lists the packages outside the standard library a
	// stdlibOnly rule still admits (import paths, walked like any other).
	allowedExternal []string
	// forbidden lists import-path prefixes that must not appear among the
	// dependencies at all, unless imported by a package in viaOK.
	forbidden []string
	// viaOK maps a forbidden import to the only importers allowed to bring
	// it in, for third-party code we use for another reason.
	viaOK map[string][]string
}

// cloudSDKs are the client libraries of the object stores.
var cloudSDKs = []string{
	"github.com/aws/", "cloud.google.com/", "google.golang.org/api", "google.golang.org/grpc",
	"github.com/Azure/", "github.com/AzureAD/",
}

// cpuFeatures is the CPU feature detection nprand's vector kernels are
// chosen by: the kernels and the scalar code give bit-identical results,
// so the order stays a pure function of its inputs. It is imported only
// by the amd64 files, where it reads CPUID and no file.
var cpuFeatures = []string{"golang.org/x/sys/cpu"}

// network lists the standard library's network packages; os/exec is here
// too since none of the guarded packages may start processes.
var network = []string{"net", "net/http", "net/rpc", "net/smtp", "crypto/tls", "os/exec"}

func rules() []rule {
	return []rule{
		{
			// Order packages: pure functions of their inputs.
			pattern:         "nprand",
			stdlibOnly:      true,
			allowedExternal: cpuFeatures,
			allowedModule:   []string{"nprand"},
			forbidden:       network,
		},
		{
			pattern:         "shuffle",
			stdlibOnly:      true,
			allowedExternal: cpuFeatures,
			allowedModule:   []string{"nprand", "shuffle"},
			forbidden:       network,
		},
		{
			pattern:         "partition",
			stdlibOnly:      true,
			allowedExternal: cpuFeatures,
			allowedModule:   []string{"nprand", "shuffle", "partition"},
			forbidden:       network,
		},
		{
			pattern:         "plan",
			stdlibOnly:      true,
			allowedExternal: cpuFeatures,
			allowedModule:   []string{"nprand", "shuffle", "partition", "plan"},
			forbidden:       network,
		},
		{
			// The agent protocol: any tool can speak it cheaply. It dials
			// a unix socket, so net is fine; HTTP and TLS are not.
			pattern:       "agentapi",
			stdlibOnly:    true,
			allowedModule: []string{"agentapi"},
			forbidden:     []string{"net/http", "net/rpc", "crypto/tls", "os/exec"},
		},
		{
			// Formats read and write bytes through io interfaces and local
			// files; compression codecs are their only third-party code.
			pattern:       "format/...",
			allowedModule: []string{"format", "internal/atomicfile", "internal/mmap"},
			forbidden:     append(slices.Clone(cloudSDKs), network...),
			viaOK: map[string][]string{
				// brotli's optional HTTPCompressor (http.go) imports
				// net/http; nothing in format uses it.
				"net/http": {"github.com/andybalholm/brotli"},
			},
		},
	}
}

// graph returns each package's direct imports for the dependency closure of
// the patterns, from one go list call.
func graph(t *testing.T, patterns []string) map[string][]string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go command not in PATH")
	}
	args := []string{"list", "-deps", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}"}
	out, err := exec.Command(gobin, append(args, patterns...)...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	g := make(map[string][]string)
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) > 0 {
			g[f[0]] = f[1:]
		}
	}
	return g
}

// roots lists the packages matching a rule's pattern.
func roots(g map[string][]string, pattern string) []string {
	var r []string
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		for p := range g {
			if p == mod+base || strings.HasPrefix(p, mod+base+"/") {
				r = append(r, p)
			}
		}
	} else if _, ok := g[mod+pattern]; ok {
		r = append(r, mod+pattern)
	}
	slices.Sort(r)
	return r
}

func isStandard(p string) bool {
	first, _, _ := strings.Cut(p, "/")
	return !strings.Contains(first, ".")
}

func hasPrefix(p string, prefixes []string) bool {
	for _, pre := range prefixes {
		if p == pre || strings.HasPrefix(p, strings.TrimSuffix(pre, "/")+"/") {
			return true
		}
	}
	return false
}

// TestDependencies walks each guarded package's imports and reports every
// forbidden one with the chain of imports that brings it in.
func TestDependencies(t *testing.T) {
	var patterns []string
	for _, r := range rules() {
		patterns = append(patterns, mod+r.pattern)
	}
	g := graph(t, patterns)
	for _, r := range rules() {
		t.Run(r.pattern, func(t *testing.T) {
			rs := roots(g, r.pattern)
			if len(rs) == 0 {
				t.Fatalf("no packages match %s", r.pattern)
			}
			var allowed []string
			for _, a := range r.allowedModule {
				allowed = append(allowed, mod+a)
			}
			// Breadth-first from all roots; parent records one importer of
			// each package, for the error message.
			parent := make(map[string]string)
			queue := slices.Clone(rs)
			for _, p := range rs {
				parent[p] = ""
			}
			for len(queue) > 0 {
				p := queue[0]
				queue = queue[1:]
				for _, q := range g[p] {
					if via, ok := r.viaOK[q]; ok && hasPrefix(p, via) {
						continue // tolerated, and not walked further from here
					}
					if msg := violation(r, allowed, q); msg != "" {
						t.Errorf("%s: %s (%s)", chain(parent, p)+" -> "+q, msg, r.pattern)
						continue // one report per chain, not one per package below
					}
					if _, seen := parent[q]; !seen {
						parent[q] = p
						queue = append(queue, q)
					}
				}
			}
		})
	}
}

// violation says why q may not be imported under r, or returns "".
func violation(r rule, allowedModule []string, q string) string {
	switch {
	case hasPrefix(q, r.forbidden):
		return "forbidden import"
	case strings.HasPrefix(q, mod) && !hasPrefix(q, allowedModule):
		return "module package outside " + strings.Join(r.allowedModule, ", ")
	case r.stdlibOnly && !isStandard(q) && !strings.HasPrefix(q, mod) && !hasPrefix(q, r.allowedExternal):
		return "only the standard library is allowed"
	}
	return ""
}

// chain renders the import path from a root to p.
func chain(parent map[string]string, p string) string {
	var c []string
	for ; p != ""; p = parent[p] {
		c = append(c, strings.TrimPrefix(p, mod))
	}
	slices.Reverse(c)
	return strings.Join(c, " -> ")
}
