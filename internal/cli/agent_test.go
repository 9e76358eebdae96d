package cli

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/sluicedata/sluice/agent"
	"github.com/sluicedata/sluice/agentapi"
)

func TestAgentSecondInstanceExitsQuietly(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "agent")
	lock, err := agent.AcquireLock(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	var out, errb bytes.Buffer
	if err := Run(context.Background(), []string{"agent", "--dir", dir}, &out, &errb); err != nil {
		t.Fatalf("second agent: %v", err)
	}
	if !strings.Contains(errb.String(), "already running") {
		t.Errorf("stderr = %q", errb.String())
	}
}

func TestAgentServesUntilCancelled(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "agent")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The agent reports "ready" on --ready-fd once it listens (what
	// --detach waits for); give it a duplicate of a pipe's write end.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	fd, err := syscall.Dup(int(w.Fd()))
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	var out, errb bytes.Buffer
	go func() {
		done <- Run(ctx, []string{"agent", "--dir", dir, "--idle-timeout", "-1s", "--ready-fd", strconv.Itoa(fd)}, &out, &errb)
	}()
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("ready line %q, %v", line, err)
	}
	c, err := agentapi.Dial(ctx, agent.SocketPath(dir), nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Connections != 1 {
		t.Errorf("connections = %d", st.Connections)
	}
	c.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("agent: %v", err)
	}
}
