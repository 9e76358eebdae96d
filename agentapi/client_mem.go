//go:build linux

package agentapi

import (
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
)

// Memory files of mapped copies (Next.MapCopies): the agent sends a file's
// descriptor once, with the first reply that lists it; the client maps it
// read-only and keeps the mapping until the agent names the file in a
// reply's Unmap, or the client is closed.

// maxFDs bounds the descriptors a reply may carry; more are closed and
// the reply refused.
const maxFDs = 4

// readReply reads one reply frame into buf. On a unix socket its first
// bytes are read with their ancillary data, so that a memory file's
// descriptor sent with them (Batch.MemFD) is received, not dropped by the
// kernel; the descriptors received are returned, open.
func readReply(conn net.Conn, buf []byte) (Frame, []byte, []int, error) {
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		f, buf, err := ReadFrame(conn, buf)
		return f, buf, nil, err
	}
	var head [frameHeadLen]byte
	oob := make([]byte, syscall.CmsgSpace(maxFDs*4))
	n, oobn, flags, _, err := uc.ReadMsgUnix(head[:], oob)
	fds, ferr := parseRights(oob[:oobn])
	switch {
	case err != nil:
	case ferr != nil:
		err = ferr
	case flags&syscall.MSG_CTRUNC != 0:
		err = fmt.Errorf("%w: a reply carried more than %d descriptors", ErrFrame, maxFDs)
	case n == 0:
		err = io.EOF // a stream socket's recvmsg reads 0 bytes at its end only
	case n < len(head):
		if _, err = io.ReadFull(uc, head[n:]); errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
	}
	var f Frame
	if err == nil {
		f, buf, err = readFrameRest(uc, head, buf)
	}
	if err != nil {
		closeFDs(fds)
		return Frame{}, buf, nil, err
	}
	return f, buf, fds, nil
}

// parseRights returns the descriptors of SCM_RIGHTS messages in oob.
func parseRights(oob []byte) ([]int, error) {
	if len(oob) == 0 {
		return nil, nil
	}
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, fmt.Errorf("agentapi: a reply's ancillary data: %w", err)
	}
	var fds []int
	for i := range msgs {
		got, err := syscall.ParseUnixRights(&msgs[i])
		if err != nil {
			continue // not SCM_RIGHTS
		}
		fds = append(fds, got...)
	}
	return fds, nil
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		syscall.Close(fd)
	}
}

// takeMems maps the memory file whose descriptor came with b (b.MemFD, in
// fds, which are closed), unmaps those b.Unmap names, and returns the
// mapping of each of b's shards that is in a memory file (nil for the
// others; nil when none is). c.mu is held.
func (c *Client) takeMems(b Batch, fds []int) ([][]byte, error) {
	defer closeFDs(fds)
	for _, id := range b.Unmap {
		if m, ok := c.mems[id]; ok {
			syscall.Munmap(m)
			delete(c.mems, id)
		}
	}
	if b.MemFD != 0 {
		if len(fds) != 1 {
			return nil, fmt.Errorf("%w: memory file %d came with %d descriptors, want 1", ErrFrame, b.MemFD, len(fds))
		}
		if err := c.mapMem(b, fds[0]); err != nil {
			return nil, err
		}
	} else if len(fds) > 0 {
		return nil, fmt.Errorf("%w: a reply carried %d descriptors and names no memory file", ErrFrame, len(fds))
	}
	var out [][]byte
	for i, s := range b.Shards {
		if s.Mem == 0 {
			continue
		}
		m, ok := c.mems[s.Mem]
		if !ok {
			return nil, fmt.Errorf("%w: memory file %d was not received", ErrFrame, s.Mem)
		}
		if s.Size < 0 || s.Size > int64(len(m)) {
			return nil, fmt.Errorf("%w: memory file %d listed with %d bytes, mapped %d", ErrFrame, s.Mem, s.Size, len(m))
		}
		if out == nil {
			out = make([][]byte, len(b.Shards))
		}
		out[i] = m
	}
	return out, nil
}

// mapMem maps the memory file b.MemFD from fd, to the size b lists it with.
func (c *Client) mapMem(b Batch, fd int) error {
	id := b.MemFD
	if _, ok := c.mems[id]; ok {
		return fmt.Errorf("%w: memory file %d sent twice", ErrFrame, id)
	}
	var size int64 = -1
	for _, s := range b.Shards {
		if s.Mem == id {
			size = s.Size
			break
		}
	}
	if size <= 0 {
		return fmt.Errorf("%w: memory file %d is not listed with a size", ErrFrame, id)
	}
	// A mapping past the file's end faults when read: check its size.
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return fmt.Errorf("agentapi: memory file %d: %w", id, err)
	}
	if st.Size < size {
		return fmt.Errorf("%w: memory file %d holds %d bytes, listed with %d", ErrFrame, id, st.Size, size)
	}
	m, err := syscall.Mmap(fd, 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("agentapi: map memory file %d: %w", id, err)
	}
	if c.mems == nil {
		c.mems = map[int][]byte{}
	}
	c.mems[id] = m
	return nil
}

// unmapAll drops every memory file's mapping; c.mu is held.
func (c *Client) unmapAll() {
	for id, m := range c.mems {
		syscall.Munmap(m)
		delete(c.mems, id)
	}
}
