package convert

import (
	"context"
	"fmt"

	"github.com/sluicedata/sluice/convert/input"
	"github.com/sluicedata/sluice/tokenize"
)

// sequence takes batches in input order, assigns records to shards with
// MosaicML's size accounting and hands complete shards to builders. With
// packing, it concatenates the documents' token ids (in input order) and
// cuts them into blocks, one record each.
func (p *pipeline) sequence(ctx context.Context, results <-chan *batch, window <-chan struct{}, commits chan<- *shardJob, buildSem chan struct{}) error {
	pending := map[int64]*batch{}
	var next int64
	stats := p.stats.clone()
	pos := p.resume.next
	shard := len(p.infos)
	base := int64(8 + len(p.config))
	size := base
	var recs [][]byte
	var recBytes int64

	// flush cuts a shard; resumeAt is the input position a restart goes on
	// from, carry the packed tokens not in the shards cut so far.
	flush := func(resumeAt int64, carry []int32) error {
		job := &shardJob{index: shard, records: recs, bytes: recBytes, next: resumeAt, stats: stats.clone(), done: make(chan shardResult, 1)}
		if carry != nil {
			job.carry = append([]int32{}, carry...)
		}
		select {
		case buildSem <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		go func() {
			defer func() { <-buildSem }()
			job.done <- p.build(job)
		}()
		select {
		case commits <- job:
		case <-ctx.Done():
			return ctx.Err()
		}
		shard++
		recs, recBytes, size = nil, 0, base
		return nil
	}
	// place appends one record, cutting a shard before it when it does not
	// fit (MosaicML flushes before a record that does not fit, even when
	// the shard is empty; spec section 6.3).
	place := func(rec []byte, loc string, resumeAt int64, carry func() []int32) error {
		n := int64(len(rec))
		if p.r.sizeLimit > 0 && size+n+4 > p.r.sizeLimit {
			var c []int32
			if carry != nil {
				c = carry()
			}
			if err := flush(resumeAt, c); err != nil {
				return err
			}
		}
		if size+n+4 > maxShardBytes {
			return fmt.Errorf("convert: %s: shard %d would exceed 4 GiB; set a size limit", loc, shard)
		}
		recs = append(recs, rec)
		recBytes += n
		size += n + 4
		stats.SamplesOut++
		return nil
	}
	var packer *tokenize.Packer
	if p.r.Pack > 0 {
		var err error
		if packer, err = tokenize.NewPacker(p.r.Pack, p.tokenizers[0].model.EOS()); err != nil {
			return fmt.Errorf("convert: %w", err)
		}
		packer.Preload(p.resume.carry)
	}
	blockRecord := func(block []int32) ([]byte, error) {
		v := input.NDArrayValue("int32", int32Bytes(block))
		return p.lay.appendRecord(nil, []input.Value{v})
	}
	for b := range results {
		pending[b.seq] = b
		for {
			cur, ok := pending[next]
			if !ok {
				break
			}
			delete(pending, next)
			next++
			<-window
			if cur.err != nil {
				return cur.err
			}
			for k, n := range cur.nulls {
				if n > 0 {
					if stats.Nulls == nil {
						stats.Nulls = map[string]int64{}
					}
					stats.Nulls[p.lay.cols[k].name] += n
				}
			}
			for i, rec := range cur.records {
				p.read.Add(1)
				if cur.reasons[i] != "" {
					stats.Failures[cur.reasons[i]]++
					stats.SamplesIn++
					pos++
					p.skipped.Add(1)
					continue
				}
				if packer == nil {
					// A cut before this record resumes at it: it is not
					// counted in the figures of the shards before.
					if err := place(rec, cur.items[i].Loc(), pos, nil); err != nil {
						return err
					}
					stats.SamplesIn++
					pos++
					continue
				}
				// The whole document goes into the packer before its blocks
				// are placed, so a restart after a cut goes on after it,
				// with the tokens not yet in a shard carried over.
				stats.SamplesIn++
				pos++
				stats.Tokens += int64(len(cur.tokens[i])) + 1
				loc, after := cur.items[i].Loc(), pos
				err := packer.Add(cur.tokens[i], func(block []int32) error {
					r, err := blockRecord(block)
					if err != nil {
						return fmt.Errorf("convert: %s: %w", loc, err)
					}
					return place(r, loc, after, packer.Unplaced)
				})
				if err != nil {
					return err
				}
			}
			stats.Tokens += cur.ntokens
			stats.FetchAttempted += int64(cur.fetched)
			stats.FetchSucceeded += int64(cur.fetchOK)
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if packer != nil {
		dropped, err := packer.Flush(!p.r.PackDropLast, func(block []int32) error {
			r, err := blockRecord(block)
			if err != nil {
				return fmt.Errorf("convert: last block: %w", err)
			}
			return place(r, "last block", pos, packer.Unplaced)
		})
		if err != nil {
			return err
		}
		stats.TokensDropped += int64(dropped)
	}
	p.final = stats // read after the pipeline's Wait
	if len(recs) > 0 {
		return flush(pos, nil)
	}
	return nil
}
