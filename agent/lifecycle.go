package agent

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// File names inside the agent directory.
const (
	// LockName is the lock file the live agent holds with flock.
	LockName = "agent.lock"
	// SocketName is the Unix socket the agent listens on.
	SocketName = "agent.sock"
	// LogName is where a detached agent's output goes.
	LogName = "agent.log"
)

// ErrRunning reports that another live agent holds the lock of the
// directory.
var ErrRunning = errors.New("agent: another agent is running")

// DefaultDir returns the agent directory of the current user:
// $SLUICE_AGENT_DIR, else $XDG_RUNTIME_DIR/sluice, else
// <temp dir>/sluice-<uid>. Each user gets their own, so users never clash.
func DefaultDir() string {
	if d := os.Getenv("SLUICE_AGENT_DIR"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "sluice")
	}
	return filepath.Join(os.TempDir(), "sluice-"+strconv.Itoa(os.Getuid()))
}

// SocketPath returns the socket path inside dir.
func SocketPath(dir string) string { return filepath.Join(dir, SocketName) }

// PrepareDir creates dir with mode 0700 if needed and checks that it
// belongs to the current user and is not accessible to others, so no other
// user can reach the socket or plant files in it.
func PrepareDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("agent: create directory %s: %w", dir, err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("agent: directory %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("agent: %s is not a directory", dir)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if ok && int(st.Uid) != os.Getuid() {
		return fmt.Errorf("agent: directory %s belongs to uid %d, not to the current user %d: %w (set SLUICE_AGENT_DIR)", dir, st.Uid, os.Getuid(), os.ErrPermission)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("agent: restrict directory %s: %w", dir, err)
		}
	}
	return nil
}

// Lock is the agent lock of a directory. Holding it makes this process the
// directory's agent. The kernel drops it when the process dies, so a lock
// file left behind by a dead agent never blocks the next one.
type Lock struct {
	dir string
	f   *os.File
}

// AcquireLock prepares dir and takes its agent lock without waiting. It
// returns an error matching ErrRunning when a live agent holds it.
func AcquireLock(dir string) (*Lock, error) {
	if err := PrepareDir(dir); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, LockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("agent: open lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w (lock %s)", ErrRunning, path)
		}
		return nil, fmt.Errorf("agent: lock %s: %w", path, err)
	}
	// Record the holder for people looking at the directory; the lock, not
	// this content, is what counts.
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &Lock{dir: dir, f: f}, nil
}

// Listen re-creates the socket of the lock's directory (removing one left
// by a dead agent) and listens on it with owner-only permissions. Only the
// lock holder may call it, which is what makes the removal safe.
func (l *Lock) Listen() (net.Listener, error) {
	path := SocketPath(l.dir)
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("agent: remove stale socket %s: %w", path, err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("agent: listen on %s: %w", path, err)
	}
	// The 0700 directory already keeps other users out during the moment
	// before this chmod.
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("agent: restrict socket %s: %w", path, err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	return ln, nil
}

// Release removes the socket and drops the lock. The lock file stays; it is
// harmless because only a live flock counts.
func (l *Lock) Release() error {
	if err := os.Remove(SocketPath(l.dir)); err != nil && !errors.Is(err, os.ErrNotExist) {
		l.f.Close()
		return fmt.Errorf("agent: remove socket: %w", err)
	}
	return l.f.Close()
}
