//go:build !linux

package cache

import "os"

// openDirect reports that direct I/O is not used on this platform.
func openDirect(string) (*os.File, error) { return nil, errNoDirect }

// isNoDirect reports an error with which a file system refuses direct I/O.
func isNoDirect(error) bool { return false }
