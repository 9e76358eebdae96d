package agentapi

import (
	"context"
	"fmt"
)

// TarSeqOpen opens a tar dataset for sequential streaming.
func (c *Client) TarSeqOpen(ctx context.Context, req TarSeqOpen) (TarSeqOpened, error) {
	req.Op = OpTarSeqOpen
	var out TarSeqOpened
	err := c.call(ctx, req, OpTarSeqOpen, &out)
	return out, err
}

// TarSeqBegin begins (or resumes) one reader's epoch.
func (c *Client) TarSeqBegin(ctx context.Context, req TarSeqBegin) (TarSeqBegun, error) {
	req.Op = OpTarSeqBegin
	var out TarSeqBegun
	err := c.call(ctx, req, OpTarSeqBegin, &out)
	return out, err
}

// TarSeqNext returns up to req.Max samples: the reply and each sample's
// tar record (views into one copy of the body).
func (c *Client) TarSeqNext(ctx context.Context, req TarSeqNext) (TarSeqBatch, [][]byte, error) {
	req.Op = OpTarSeqNext
	c.mu.Lock()
	defer c.mu.Unlock()
	f, err := c.roundTrip(ctx, req)
	if err != nil {
		return TarSeqBatch{}, nil, err
	}
	var out TarSeqBatch
	if err := decodeReply(f, OpTarSeqBatch, &out); err != nil {
		return TarSeqBatch{}, nil, err
	}
	if out.N < 0 || len(out.Lengths) != out.N || len(out.Shards) != out.N {
		return TarSeqBatch{}, nil, fmt.Errorf("%w: tarseq_batch of %d samples with %d lengths, %d shards", ErrFrame, out.N, len(out.Lengths), len(out.Shards))
	}
	body := append([]byte(nil), f.Body...)
	recs := make([][]byte, out.N)
	var off int64
	for i, n := range out.Lengths {
		if n < 0 || n > int64(len(body))-off {
			return TarSeqBatch{}, nil, fmt.Errorf("%w: tarseq_batch record %d of %d bytes past its %d-byte body", ErrFrame, i, n, len(body))
		}
		recs[i] = body[off : off+n]
		off += n
	}
	return out, recs, nil
}

// TarSeqEnd ends an iteration.
func (c *Client) TarSeqEnd(ctx context.Context, iter int) error {
	return c.call(ctx, TarSeqEnd{Op: OpTarSeqEnd, Iter: iter}, OpOK, &OK{})
}

// TarSeqState returns the resume states of a rank's workers.
func (c *Client) TarSeqState(ctx context.Context, req TarSeqStateQuery) (TarSeqStates, error) {
	req.Op = OpTarSeqState
	var out TarSeqStates
	err := c.call(ctx, req, OpTarSeqState, &out)
	return out, err
}
