package version

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// The Python package and the wheel carry the same number as the binary.
func TestPythonVersionMatches(t *testing.T) {
	b, err := os.ReadFile("../../python/sluice/_version.py")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`__version__ = "([^"]+)"`).FindSubmatch(b)
	if m == nil {
		t.Fatal("python/sluice/_version.py has no __version__")
	}
	if string(m[1]) != Number() {
		t.Fatalf("python/sluice/_version.py says %s, internal/version/VERSION says %s", m[1], Number())
	}
}

func TestNumberIsDotted(t *testing.T) {
	if !regexp.MustCompile(`^\d+\.\d+\.\d+([a-z0-9.+-]*)$`).MatchString(Number()) {
		t.Fatalf("version %q is not a release number", Number())
	}
	if !strings.HasPrefix(Long(), "sluice "+Number()+" (") {
		t.Fatalf("Long() = %q", Long())
	}
}
