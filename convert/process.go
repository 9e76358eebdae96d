package convert

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluicedata/sluice/convert/input"
)

// process decodes, fetches and encodes one batch.
func (p *pipeline) process(ctx context.Context, b *batch, row []input.Value, hint *int) error {
	ncols := len(p.lay.cols)
	fetching := p.fetcher != nil
	var rows []input.Value
	if fetching {
		rows = make([]input.Value, len(b.items)*ncols)
	}
	b.records = make([][]byte, len(b.items))
	b.reasons = make([]string, len(b.items))
	arena := make([]byte, 0, *hint+*hint/8)
	defer func() { *hint = max(4<<10, len(arena)) }()
	b.nulls = make([]int64, ncols)
	encode := func(i int, vals []input.Value) error {
		start := len(arena)
		rec, err := p.lay.appendRecord(arena, vals)
		if err != nil {
			switch {
			case errors.Is(err, errNull) && p.r.Nulls == NullsSkipRow:
				b.reasons[i] = "null"
				return nil
			case p.r.SkipInvalid:
				b.reasons[i] = "invalid"
				return nil
			case errors.Is(err, errNull):
				return fmt.Errorf("convert: %s: %w (choose a policy with --nulls skip-row or --nulls default)", b.items[i].Loc(), err)
			}
			return fmt.Errorf("convert: %s: %w", b.items[i].Loc(), err)
		}
		// If the arena grew, earlier records keep pointing into the old
		// array, which stays valid.
		arena = rec
		b.records[i] = arena[start:len(arena):len(arena)]
		return nil
	}
	// One callback for the whole batch (a closure per item would allocate).
	var vals []input.Value
	texts := make([]input.Value, len(p.tokenizers))
	if p.r.Pack > 0 {
		b.tokens = make([][]int32, len(b.items))
	}
	set := func(name []byte, v input.Value) error {
		if k, ok := p.lay.index[string(name)]; ok {
			vals[k] = v
		}
		for j := range p.tokenizers {
			if p.tokenizers[j].name == string(name) {
				texts[j] = v
			}
		}
		return nil
	}
	for i := range b.items {
		vals = row
		if fetching {
			vals = rows[i*ncols : (i+1)*ncols]
		}
		clear(vals)
		clear(texts)
		err := p.src.Decode(ctx, &b.items[i], set)
		if err != nil {
			var skip *input.SkipError
			switch {
			case errors.As(err, &skip):
				b.reasons[i] = skip.Reason
				continue
			case errors.Is(err, input.ErrNullElement) && p.r.Nulls == NullsSkipRow:
				b.reasons[i] = "null"
				continue
			case p.r.SkipInvalid && !errors.Is(err, context.Canceled):
				b.reasons[i] = "invalid"
				continue
			}
			return fmt.Errorf("convert: %w", err)
		}
		if len(p.tokenizers) > 0 {
			reason, err := p.tokenizeRow(b, i, texts, vals)
			if err != nil {
				return err
			}
			if reason != "" {
				b.reasons[i] = reason
				continue
			}
			if p.r.Pack > 0 {
				continue // the sequencer packs b.tokens
			}
		}
		for k := range vals {
			if vals[k].Kind == input.Null {
				b.nulls[k]++
			}
		}
		if !fetching {
			if err := encode(i, vals); err != nil {
				return err
			}
		}
	}
	if !fetching {
		return nil
	}
	if err := p.fetchBatch(ctx, b, rows); err != nil {
		return err
	}
	for i := range b.items {
		if b.reasons[i] != "" {
			continue
		}
		if err := encode(i, rows[i*ncols:(i+1)*ncols]); err != nil {
			return err
		}
	}
	return nil
}
