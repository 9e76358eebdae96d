//go:build !linux

package agentapi

import (
	"fmt"
	"net"
)

// readReply reads one reply frame into buf: memory files of mapped copies
// are received on Linux only (client_mem.go), so none come here.
func readReply(conn net.Conn, buf []byte) (Frame, []byte, []int, error) {
	f, buf, err := ReadFrame(conn, buf)
	return f, buf, nil, err
}

func closeFDs([]int) {}

// takeMems refuses a reply that lists a memory file: they are mapped on
// Linux only.
func (c *Client) takeMems(b Batch, _ []int) ([][]byte, error) {
	for _, s := range b.Shards {
		if s.Mem != 0 {
			return nil, fmt.Errorf("%w: memory file %d: mapped copies need Linux", ErrFrame, s.Mem)
		}
	}
	return nil, nil
}

func (c *Client) unmapAll() {}
