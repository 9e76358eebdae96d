package cache

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestManifestOrphanTempsRemoved: a writer killed between creating its
// temporary manifest and the rename leaves the file behind; the next
// write of that manifest deletes the temporary files of processes that no
// longer exist, and leaves a live process's (it may be writing) and names
// that are not a writer's.
func TestManifestOrphanTempsRemoved(t *testing.T) {
	ctx := context.Background()
	data := bytes.Repeat([]byte("orphan"), 100)
	mb := memWith(t, data, "a.mds")
	c, err := Open(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	d, err := c.Add(ctx, &Source{Dir: "ds", Bucket: mb, Backoff: func(int) time.Duration { return time.Millisecond },
		Shards: []Shard{{Files: []File{{Raw: "a.mds", RawBytes: int64(len(data))}}}}})
	if err != nil {
		t.Fatal(err)
	}
	p := d.manifestPath()
	// A process that has exited: its ID names no process (until reused,
	// which a test run does not reach).
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := fmt.Sprintf("%s.%d-1a2b-0.tmp", p, cmd.Process.Pid)
	live := fmt.Sprintf("%s.%d-1a2b-0.tmp", p, os.Getppid())
	own := fmt.Sprintf("%s.%d-1a2b-7.tmp", p, os.Getpid())
	odd := p + ".notapid.tmp"
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{dead, live, own, odd} {
		if err := os.WriteFile(n, []byte("torn"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.writeManifest(ctx, []byte("{}\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dead); err == nil {
		t.Errorf("%s: a dead writer's temporary file was kept", filepath.Base(dead))
	}
	for _, n := range []string{live, own, odd} {
		if _, err := os.Stat(n); err != nil {
			t.Errorf("%s: removed (%v), want kept", filepath.Base(n), err)
		}
	}
}
