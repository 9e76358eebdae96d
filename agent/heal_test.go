package agent

import (
	"net"
	"os"
	"testing"
	"time"
)

// A socket file removed under a live agent is re-created, and clients
// reach the agent again.
func TestListenHealingRecreatesRemovedSocket(t *testing.T) {
	dir := t.TempDir()
	lock, err := AcquireLock(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	ln, err := lock.ListenHealing(5*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan error, 8)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				accepted <- err
				return
			}
			c.Close()
			accepted <- nil
		}
	}()
	dial := func() error {
		c, err := net.Dial("unix", SocketPath(dir))
		if err != nil {
			return err
		}
		return c.Close()
	}
	if err := dial(); err != nil {
		t.Fatalf("first dial: %v", err)
	}
	if err := <-accepted; err != nil {
		t.Fatalf("accept: %v", err)
	}

	if err := os.Remove(SocketPath(dir)); err != nil {
		t.Fatal(err)
	}
	// The watchdog runs every 5ms; allow it generous time on a loaded machine.
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := dial()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("socket not re-created: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := <-accepted; err != nil {
		t.Fatalf("accept after re-create: %v", err)
	}
	if fi, err := os.Stat(SocketPath(dir)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("re-created socket: %v, mode %v", err, fi.Mode().Perm())
	}

	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-accepted; err == nil {
		t.Fatal("Accept after Close returned no error")
	}
}
