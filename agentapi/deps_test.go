package agentapi

import (
	"os/exec"
	"strings"
	"testing"
)

// TestStdlibOnly keeps the protocol package free of dependencies beyond the
// standard library, so that any tool can speak to an agent cheaply.
func TestStdlibOnly(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go command not available")
	}
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if p != "github.com/sluicedata/sluice/agentapi" {
			t.Errorf("agentapi depends on %s", p)
		}
	}
}
