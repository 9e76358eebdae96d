package cache

import (
	"errors"
	"os"
	"syscall"
)

// openDirect opens the file at path for writing with O_DIRECT.
func openDirect(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_DIRECT, 0)
	if isNoDirect(err) {
		return nil, errNoDirect
	}
	return f, err
}

// isNoDirect reports an error with which a file system refuses direct
// I/O (EINVAL: O_DIRECT or the alignment not supported).
func isNoDirect(err error) bool { return errors.Is(err, syscall.EINVAL) }
