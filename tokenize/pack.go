package tokenize

import "fmt"

// Packer concatenates documents' token ids, each followed by an EOS id,
// and cuts the stream into blocks of a fixed length, as LLM pre-training
// expects: no token is lost or repeated, and only the last block may be
// partial (kept or dropped by the caller's choice).
type Packer struct {
	n   int
	eos int32
	buf []int32 // tokens not yet emitted (fewer than n between calls)
	off int     // start of the block being emitted, during emit
	// consumed counts the tokens emitted so far (blocks*n).
	consumed int64
	added    int64
}

// NewPacker returns a Packer of blocks of n tokens that ends every
// document with eos.
func NewPacker(n int, eos int32) (*Packer, error) {
	if n < 1 {
		return nil, fmt.Errorf("tokenize: block length %d must be positive", n)
	}
	if eos < 0 {
		return nil, fmt.Errorf("tokenize: packing needs an EOS id; the model has none")
	}
	return &Packer{n: n, eos: eos, buf: make([]int32, 0, 2*n)}, nil
}

// BlockLen returns the block length.
func (p *Packer) BlockLen() int { return p.n }

// Add appends one document's ids and its EOS and calls emit for every
// block that is complete. The block passed to emit is only valid during
// the call.
func (p *Packer) Add(ids []int32, emit func(block []int32) error) error {
	p.buf = append(p.buf, ids...)
	p.buf = append(p.buf, p.eos)
	p.added += int64(len(ids)) + 1
	p.off = 0
	for len(p.buf)-p.off >= p.n {
		if err := emit(p.buf[p.off : p.off+p.n]); err != nil {
			return err
		}
		p.off += p.n
		p.consumed += int64(p.n)
	}
	p.buf = append(p.buf[:0], p.buf[p.off:]...)
	p.off = 0
	return nil
}

// Unplaced returns the tokens from the block being emitted on (that
// block included): called from emit, what a restart must carry over when
// the caller cuts its output before that block. Valid only during emit.
func (p *Packer) Unplaced() []int32 { return p.buf[p.off:] }

// Preload puts tokens carried over from an interrupted run (what Unplaced
// returned) at the start of the stream.
func (p *Packer) Preload(tokens []int32) {
	p.buf = append(p.buf[:0], tokens...)
}

// Pending returns the tokens of the partial block.
func (p *Packer) Pending() []int32 { return p.buf }

// Tokens returns the tokens added so far, EOS ids included.
func (p *Packer) Tokens() int64 { return p.added }

// Flush emits the partial last block, if there is one and keep is true,
// and empties the Packer. It returns the number of tokens dropped.
func (p *Packer) Flush(keep bool, emit func(block []int32) error) (dropped int, err error) {
	if len(p.buf) == 0 {
		return 0, nil
	}
	defer func() { p.buf = p.buf[:0] }()
	if !keep {
		return len(p.buf), nil
	}
	p.off = 0
	p.consumed += int64(len(p.buf))
	return 0, emit(p.buf)
}
