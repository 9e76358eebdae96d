package agent

import (
	"net"
	"os"
	"sync"
	"syscall"
	"time"
)

// ListenHealing is Listen plus a watchdog that keeps the socket reachable.
// Every interval it checks that the socket path still names the socket this
// agent created; if the file was removed or replaced (a clean-up script, a
// tmp reaper, a user's rm), it re-creates the socket and carries on
// accepting there, so clients never find a live agent that they cannot
// reach. Connections already accepted are not affected. Only the lock holder
// may call it. Closing the returned listener stops the watchdog.
func (l *Lock) ListenHealing(interval time.Duration, logf func(msg string, args ...any)) (net.Listener, error) {
	ln, err := l.Listen()
	if err != nil {
		return nil, err
	}
	h := &healingListener{lock: l, ln: ln, ino: socketInode(SocketPath(l.dir)), done: make(chan struct{}), logf: logf}
	h.wg.Add(1)
	go h.watch(interval)
	return h, nil
}

// healingListener is a net.Listener whose underlying Unix listener the
// watchdog may replace; Accept moves on to the new one.
type healingListener struct {
	lock *Lock
	logf func(msg string, args ...any)
	done chan struct{} // closed by Close; stops the watchdog
	wg   sync.WaitGroup

	// mu guards the fields below.
	mu     sync.Mutex
	ln     net.Listener // the listener Accept uses now
	ino    uint64       // inode of the socket file ln listens on
	closed bool
}

func (h *healingListener) Accept() (net.Conn, error) {
	for {
		h.mu.Lock()
		ln, closed := h.ln, h.closed
		h.mu.Unlock()
		if closed {
			return nil, net.ErrClosed
		}
		c, err := ln.Accept()
		if err == nil {
			return c, nil
		}
		h.mu.Lock()
		replaced := h.ln != ln && !h.closed
		h.mu.Unlock()
		if !replaced {
			return nil, err
		}
	}
}

func (h *healingListener) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return net.ErrClosed
	}
	h.closed = true
	ln := h.ln
	h.mu.Unlock()
	close(h.done)
	err := ln.Close()
	h.wg.Wait()
	return err
}

func (h *healingListener) Addr() net.Addr {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ln.Addr()
}

func (h *healingListener) watch(interval time.Duration) {
	defer h.wg.Done()
	t := time.NewTicker(interval)
	defer t.Stop()
	path := SocketPath(h.lock.dir)
	for {
		select {
		case <-h.done:
			return
		case <-t.C:
		}
		h.mu.Lock()
		want := h.ino
		h.mu.Unlock()
		if got := socketInode(path); got != 0 && got == want {
			continue
		}
		ln, err := h.lock.Listen()
		if err != nil {
			if h.logf != nil {
				h.logf("socket missing; re-creating it failed, will retry", "socket", path, "err", err)
			}
			continue
		}
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			ln.Close()
			return
		}
		old := h.ln
		h.ln, h.ino = ln, socketInode(path)
		h.mu.Unlock()
		old.Close() // wakes Accept, which moves on to ln
		if h.logf != nil {
			h.logf("socket was removed or replaced; re-created it", "socket", path)
		}
	}
}

// socketInode returns the inode of path if it is a socket, else 0.
func socketInode(path string) uint64 {
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode()&os.ModeSocket == 0 {
		return 0
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0
	}
	return st.Ino
}
