package cache

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// tryLock attempts a non-blocking flock on f. It reports false, with a nil
// error, when another open file description holds a conflicting lock.
func tryLock(f *os.File, exclusive bool) (bool, error) {
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	for {
		err := unix.Flock(int(f.Fd()), how|unix.LOCK_NB)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EWOULDBLOCK):
			return false, nil
		default:
			return false, fmt.Errorf("flock %s: %w", f.Name(), err)
		}
	}
}

// unlock drops f's flock. Closing f drops it too.
func unlock(f *os.File) error {
	return unix.Flock(int(f.Fd()), unix.LOCK_UN)
}

// backoff yields growing pauses for polling loops that wait on another
// process, from min to max.
type backoff struct {
	d, max time.Duration
}

func newBackoff(min, max time.Duration) backoff { return backoff{d: min, max: max} }

// wait pauses for the next interval, returning early when ctx is done or
// wake fires. A nil wake never fires.
func (b *backoff) wait(ctx context.Context, wake <-chan struct{}) error {
	t := time.NewTimer(b.d)
	defer t.Stop()
	if b.d *= 2; b.d > b.max {
		b.d = b.max
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-wake:
		return nil
	case <-t.C:
		return nil
	}
}

// lockWait takes a flock on f, polling until ctx is done. Locks in this
// package are held for short, bounded work, so polling is cheap; flock has
// no timeout of its own.
func lockWait(ctx context.Context, f *os.File, exclusive bool) error {
	bo := newBackoff(50*time.Microsecond, 5*time.Millisecond)
	for {
		ok, err := tryLock(f, exclusive)
		if err != nil || ok {
			return err
		}
		if err := bo.wait(ctx, nil); err != nil {
			return fmt.Errorf("waiting for lock %s%s: %w", f.Name(), holders(f), err)
		}
	}
}

// sameFile reports whether path still names the file open as f (it may
// have been unlinked or replaced after f was opened), with f's FileInfo.
func sameFile(f *os.File, path string) (os.FileInfo, bool, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, false, err
	}
	pi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return fi, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return fi, os.SameFile(fi, pi), nil
}

// tighten sets path's permission bits to mode when this user owns it
// (best effort: a cache someone else made keeps its mode).
func tighten(path string, mode os.FileMode) {
	fi, err := os.Stat(path)
	if err != nil {
		return
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || int(st.Uid) != os.Getuid() {
		return
	}
	want := mode & (os.ModePerm | os.ModeSetgid)
	if fi.Mode()&(os.ModePerm|os.ModeSetgid) != want {
		_ = os.Chmod(path, want)
	}
}

// holders returns ", held by pid N (command)" for the processes that hold
// a flock on f's file, as /proc/locks tells; empty where it cannot tell.
func holders(f *os.File) string {
	fi, err := f.Stat()
	if err != nil {
		return ""
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		return ""
	}
	pids := lockPIDs(string(b), uint64(unix.Major(uint64(st.Dev))), uint64(unix.Minor(uint64(st.Dev))), st.Ino)
	if len(pids) == 0 {
		return ""
	}
	var parts []string
	for _, pid := range pids {
		desc := "pid " + strconv.Itoa(pid)
		if pid == os.Getpid() {
			desc += " (this process)"
		} else if comm, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm"); err == nil {
			desc += " (" + strings.TrimSpace(string(comm)) + ")"
		}
		parts = append(parts, desc)
	}
	return ", held by " + strings.Join(parts, ", ")
}

// lockPIDs parses /proc/locks for the FLOCK holders of the file with the
// given device numbers and inode. Lines read
// "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"; waiters ("->") are
// skipped.
func lockPIDs(locks string, major, minor, ino uint64) []int {
	var pids []int
	for _, line := range strings.Split(locks, "\n") {
		fields := strings.Fields(line)
		if len(fields) < 6 || fields[1] == "->" || fields[1] != "FLOCK" {
			continue
		}
		parts := strings.Split(fields[5], ":")
		if len(parts) != 3 {
			continue
		}
		maj, err1 := strconv.ParseUint(parts[0], 16, 32)
		mnr, err2 := strconv.ParseUint(parts[1], 16, 32)
		in, err3 := strconv.ParseUint(parts[2], 10, 64)
		pid, err4 := strconv.Atoi(fields[4])
		if err1 != nil || err2 != nil || err3 != nil || err4 != nil {
			continue
		}
		if maj == major && mnr == minor && in == ino && !slices.Contains(pids, pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}
