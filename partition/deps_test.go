package partition_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestPureDependencies asserts that the order packages stay pure: they may
// import only the standard library and each other (no storage, format or
// cloud SDKs).
func TestPureDependencies(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not in PATH")
	}
	const mod = "github.com/sluicedata/sluice/"
	pkgs := []string{mod + "nprand", mod + "shuffle", mod + "partition"}
	out, err := exec.Command(gobin, append([]string{"list", "-deps"}, pkgs...)...).Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	allowed := map[string]bool{pkgs[0]: true, pkgs[1]: true, pkgs[2]: true}
	for _, p := range strings.Fields(string(out)) {
		first, _, _ := strings.Cut(p, "/")
		if strings.Contains(first, ".") && !allowed[p] {
			t.Errorf("%s is imported by the order packages; they must stay pure", p)
		}
	}
}
