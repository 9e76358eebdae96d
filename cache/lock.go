package cache

import (
	"context"
	"errors"
	"fmt"
	"os"
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
			return fmt.Errorf("waiting for lock %s: %w", f.Name(), err)
		}
	}
}

// sameFile reports whether path still names the file open as f (it may
// have been unlinked or replaced after f was opened).
func sameFile(f *os.File, path string) (bool, error) {
	fi, err := f.Stat()
	if err != nil {
		return false, err
	}
	pi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return os.SameFile(fi, pi), nil
}
