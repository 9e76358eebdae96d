package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCpTarPattern copies WebDataset tars named by a brace pattern from a
// plain HTTP server (which cannot list, and holds no index.json): the tars
// the pattern names arrive whole, nothing else does, and a tar the
// pattern names that the server lacks is an error naming it.
func TestCpTarPattern(t *testing.T) {
	src := writeTwoTars(t)
	if err := os.WriteFile(filepath.Join(src, "other.bin"), []byte("not named"), 0o644); err != nil {
		t.Fatal(err)
	}
	u, _ := countingFileServer(t, src)
	dst := filepath.Join(t.TempDir(), "copy")
	out, err := runCLI(t, "cp", "--progress", "none", u+"/a-{0..1}.tar", dst)
	if err != nil {
		t.Fatalf("cp: %v\n%s", err, out)
	}
	ents, err := os.ReadDir(dst)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "a-0.tar a-1.tar" {
		t.Errorf("copied %v, want the two tars", names)
	}
	for _, n := range []string{"a-0.tar", "a-1.tar"} {
		want, _ := os.ReadFile(filepath.Join(src, n))
		got, err := os.ReadFile(filepath.Join(dst, n))
		if err != nil || !bytes.Equal(got, want) || len(want) == 0 {
			t.Errorf("%s: %d bytes copied of %d (%v)", n, len(got), len(want), err)
		}
	}
	if _, err := runCLI(t, "cp", "--progress", "none", u+"/a-{0..2}.tar", filepath.Join(t.TempDir(), "c2")); err == nil || !strings.Contains(err.Error(), "a-2.tar") {
		t.Errorf("a pattern naming a missing tar: %v, want an error naming a-2.tar", err)
	}
}
