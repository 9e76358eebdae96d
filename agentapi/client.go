package agentapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"
)

// DefaultTimeout bounds each request when the context has no deadline.
const DefaultTimeout = 60 * time.Second

// Client speaks the protocol over one connection. It is safe for concurrent
// use; requests are serialised, one in flight at a time.
type Client struct {
	// AgentPID and Version are what the agent announced in its hello.
	AgentPID int
	Version  int
	// Features are the agent's announced features (Hello.Features).
	Features []string

	timeout time.Duration

	// mu serialises requests and guards the buffers.
	mu   sync.Mutex
	conn net.Conn
	rbuf []byte // reused frame buffer; replies alias it until the next call
	wbuf []byte
	err  error // sticky transport error: the connection is unusable
	// mems are the memory files of mapped copies the agent sent, mapped
	// (client_mem.go), by id.
	mems map[int][]byte
}

// ClientOptions tunes Dial. A nil *ClientOptions means the defaults.
type ClientOptions struct {
	// Software names the client in the hello ("" means "sluice-go").
	Software string
	// Timeout bounds each request whose context has no deadline (0 means
	// DefaultTimeout).
	Timeout time.Duration
}

// Dial connects to the agent listening on the Unix socket at path and
// performs the hello exchange.
func Dial(ctx context.Context, path string, opts *ClientOptions) (*Client, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("agentapi: dial %s: %w", path, err)
	}
	c, err := NewClient(ctx, conn, opts)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return c, nil
}

// NewClient wraps an established connection; it performs the hello
// exchange like Dial.
func NewClient(ctx context.Context, conn net.Conn, opts *ClientOptions) (*Client, error) {
	var o ClientOptions
	if opts != nil {
		o = *opts
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Software == "" {
		o.Software = "sluice-go"
	}
	c := &Client{conn: conn, timeout: o.Timeout}
	var h Hello
	if err := c.call(ctx, Hello{Op: OpHello, Version: Version, MinVersion: MinVersion, Software: o.Software, PID: os.Getpid()}, OpHello, &h); err != nil {
		return nil, err
	}
	c.AgentPID, c.Version, c.Features = h.PID, h.Version, h.Features
	return c, nil
}

// Close closes the connection; the agent releases every lease it held.
// The memory files of mapped copies are unmapped: no record read from
// BatchReply.Mapped may be used after Close.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = net.ErrClosed
	}
	c.unmapAll()
	return c.conn.Close()
}

// Open asks for a dataset handle.
func (c *Client) Open(ctx context.Context, req Open) (Opened, error) {
	req.Op = OpOpen
	var out Opened
	err := c.call(ctx, req, OpOpen, &out)
	return out, err
}

// Begin starts an epoch's iteration.
func (c *Client) Begin(ctx context.Context, req Begin) (Begun, error) {
	req.Op = OpBegin
	var out Begun
	err := c.call(ctx, req, OpBegin, &out)
	return out, err
}

// BatchReply is a decoded batch. Inline aliases the client's buffer and is
// valid until the next request on the client.
type BatchReply struct {
	Batch
	Entries []Entry
	Inline  []byte
	// Mapped holds, for each of Shards that is in a memory file of
	// mapped copies (BatchShard.Mem), the client's mapping of that file
	// (nil for the others, and nil when none is): an entry of such a
	// shard is Mapped[Ref][Offset:Offset+Length]. Its bytes hold until
	// the batch is released (the agent rewrites the file after that);
	// the mapping stays until the agent drops the file, after the
	// iteration ended, or Close.
	Mapped [][]byte
}

// Next returns the next samples of an iteration. A reply with no entries
// and Done false means the agent is still waiting for data; ask again.
func (c *Client) Next(ctx context.Context, req Next) (BatchReply, error) {
	req.Op = OpNext
	return c.batch(ctx, req)
}

// Get returns one sample by global index, leased like a batch.
func (c *Client) Get(ctx context.Context, req Get) (BatchReply, error) {
	req.Op = OpGet
	return c.batch(ctx, req)
}

func (c *Client) batch(ctx context.Context, req any) (BatchReply, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, fds, err := c.roundTripFDs(ctx, req, true)
	if err != nil {
		return BatchReply{}, err
	}
	var out BatchReply
	if err := decodeReply(f, OpBatch, &out.Batch); err != nil {
		closeFDs(fds)
		return BatchReply{}, err
	}
	if out.Mapped, err = c.takeMems(out.Batch, fds); err != nil {
		return BatchReply{}, err
	}
	out.Entries, out.Inline, err = ParseEntries(out.Batch, f.Body)
	return out, err
}

// Release hands batches back to the agent.
func (c *Client) Release(ctx context.Context, batches ...int64) error {
	return c.call(ctx, Release{Op: OpRelease, Batches: batches}, OpOK, &OK{})
}

// End stops an iteration and releases its leases.
func (c *Client) End(ctx context.Context, iter int) error {
	return c.call(ctx, End{Op: OpEnd, Iter: iter}, OpOK, &OK{})
}

// Epoch reports where a rank's iteration stands.
func (c *Client) Epoch(ctx context.Context, req EpochQuery) (EpochInfo, error) {
	req.Op = OpEpoch
	var out EpochInfo
	err := c.call(ctx, req, OpEpoch, &out)
	return out, err
}

// Stats returns the agent's figures.
func (c *Client) Stats(ctx context.Context) (Stats, error) {
	var out Stats
	err := c.call(ctx, StatsQuery{Op: OpStats}, OpStats, &out)
	return out, err
}

func (c *Client) call(ctx context.Context, req any, want string, out any) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, err := c.roundTrip(ctx, req)
	if err != nil {
		return err
	}
	return decodeReply(f, want, out)
}

// roundTrip sends req and reads the reply frame; c.mu is held.
func (c *Client) roundTrip(ctx context.Context, req any) (Frame, error) {
	f, _, err := c.roundTripFDs(ctx, req, false)
	return f, err
}

// roundTripFDs is roundTrip that, with fds, also returns the descriptors
// that came with the reply (open; the caller closes them); c.mu is held.
func (c *Client) roundTripFDs(ctx context.Context, req any, fds bool) (Frame, []int, error) {
	if c.err != nil {
		return Frame{}, nil, fmt.Errorf("agentapi: connection unusable: %w", c.err)
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(c.timeout)
	}
	if err := c.conn.SetDeadline(deadline); err != nil {
		return Frame{}, nil, c.fail(err)
	}
	stop := context.AfterFunc(ctx, func() {
		// Wake a blocked read or write; the deadline error below is then
		// replaced by ctx.Err().
		c.conn.SetDeadline(time.Unix(1, 0))
	})
	defer stop()
	var err error
	c.wbuf, err = AppendFrame(c.wbuf[:0], req, nil)
	if err != nil {
		return Frame{}, nil, err
	}
	if _, err := c.conn.Write(c.wbuf); err != nil {
		return Frame{}, nil, c.fail(ctxErr(ctx, err))
	}
	var f Frame
	var got []int
	if fds {
		f, c.rbuf, got, err = readReply(c.conn, c.rbuf)
	} else {
		f, c.rbuf, err = ReadFrame(c.conn, c.rbuf)
	}
	if err != nil {
		return Frame{}, nil, c.fail(ctxErr(ctx, err))
	}
	return f, got, nil
}

func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	return err
}

func (c *Client) fail(err error) error {
	c.err = err
	return fmt.Errorf("agentapi: connection to agent lost: %w", err)
}

func decodeReply(f Frame, want string, out any) error {
	op, err := f.Op()
	if err != nil {
		return err
	}
	if op == OpError {
		var e Error
		if err := json.Unmarshal(f.Header, &e); err != nil {
			return fmt.Errorf("%w: error reply: %v", ErrFrame, err)
		}
		return &e
	}
	if op != want {
		return fmt.Errorf("%w: reply op %q, want %q", ErrFrame, op, want)
	}
	if err := json.Unmarshal(f.Header, out); err != nil {
		return fmt.Errorf("%w: %s reply: %v", ErrFrame, op, err)
	}
	return nil
}

// IsTransport reports whether err means the connection itself failed (the
// agent died or the deadline passed), as opposed to an error reply.
func IsTransport(err error) bool {
	var e *Error
	return err != nil && !errors.As(err, &e) && !errors.Is(err, ErrFrame)
}
