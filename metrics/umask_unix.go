//go:build unix

package metrics

import "syscall"

func umask(m int) int { return syscall.Umask(m) }
