//go:build !unix

package metrics

func umask(m int) int { return m }
