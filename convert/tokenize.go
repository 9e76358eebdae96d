package convert

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/sluicedata/sluice/convert/input"
	"github.com/sluicedata/sluice/tokenize"
)

// IDsSuffix is appended to a tokenized column's name to name its ids
// column: --tokenize text=MODEL writes text_input_ids.
const IDsSuffix = "_input_ids"

// TokenizeColumn names a text column to tokenize and the model file.
type TokenizeColumn struct {
	// Column holds the text.
	Column string
	// Model is the path of a SentencePiece model file.
	Model string
}

// ParseTokenize parses a --tokenize value, "COLUMN=MODEL".
func ParseTokenize(s string) (TokenizeColumn, error) {
	col, model, ok := strings.Cut(s, "=")
	if !ok || col == "" || model == "" {
		return TokenizeColumn{}, fmt.Errorf("convert: bad --tokenize %q: want COLUMN=MODEL (a SentencePiece .model file)", s)
	}
	return TokenizeColumn{Column: col, Model: model}, nil
}

// tokCol is a loaded tokenize column.
type tokCol struct {
	name  string // the text column
	out   int    // layout index of the ids column; -1 with packing
	model *tokenize.SentencePiece
}

func (r *resolved) checkTokenize() error {
	seen := map[string]bool{}
	for _, t := range r.Tokenize {
		if seen[t.Column] {
			return fmt.Errorf("convert: --tokenize names column %q twice", t.Column)
		}
		seen[t.Column] = true
	}
	switch {
	case r.Pack < 0:
		return fmt.Errorf("convert: pack length %d must not be negative", r.Pack)
	case r.Pack == 0 && r.PackDropLast:
		return fmt.Errorf("convert: dropping the last block needs --pack")
	case r.Pack == 0:
		return nil
	case len(r.Tokenize) != 1:
		return fmt.Errorf("convert: --pack needs exactly one --tokenize column (got %d)", len(r.Tokenize))
	case len(r.Fetch) > 0:
		return fmt.Errorf("convert: --pack writes only token blocks; it does not combine with --fetch")
	case len(r.Columns) > 0:
		return fmt.Errorf("convert: --pack writes only the %s%s column; --columns does not apply", r.Tokenize[0].Column, IDsSuffix)
	}
	return nil
}

// loadTokenizers loads the models and places the ids columns.
func (p *pipeline) loadTokenizers() error {
	for _, t := range p.r.Tokenize {
		m, err := tokenize.LoadSentencePiece(t.Model)
		if err != nil {
			return fmt.Errorf("convert: --tokenize %s: %w", t.Column, err)
		}
		tc := tokCol{name: t.Column, out: -1, model: m}
		if k, ok := p.lay.index[t.Column+IDsSuffix]; ok {
			tc.out = k
		}
		if p.r.Pack == 0 && tc.out < 0 {
			return fmt.Errorf("convert: the output has no column %s%s", t.Column, IDsSuffix)
		}
		p.tokenizers = append(p.tokenizers, tc)
	}
	return nil
}

// tokenizeRow tokenizes the captured texts of item i: into the ids
// columns, or with packing into b.tokens. It returns a skip reason, or ""
// when the row goes on.
func (p *pipeline) tokenizeRow(b *batch, i int, texts []input.Value, vals []input.Value) (string, error) {
	for j := range p.tokenizers {
		tc := &p.tokenizers[j]
		v := &texts[j]
		switch v.Kind {
		case input.String, input.Text:
		case input.Null:
			if p.r.Pack == 0 {
				continue // the ids column is null: the null policy decides
			}
			switch p.r.Nulls {
			case NullsSkipRow:
				return "null", nil
			case NullsDefault:
				b.tokens[i] = nil // an empty document: its EOS only
				continue
			}
			return "", fmt.Errorf("convert: %s: column %q: %w (choose a policy with --nulls skip-row or --nulls default)", b.items[i].Loc(), tc.name, errNull)
		default:
			if p.r.SkipInvalid {
				return "invalid", nil
			}
			return "", fmt.Errorf("convert: %s: column %q holds a %s value, not text", b.items[i].Loc(), tc.name, v.Kind)
		}
		ids := tc.model.Encode(nil, string(v.Bytes))
		if p.r.Pack > 0 {
			b.tokens[i] = ids
			continue
		}
		if len(ids) == 0 {
			return "empty_text", nil
		}
		b.ntokens += int64(len(ids))
		vals[tc.out] = input.NDArrayValue("int32", int32Bytes(ids))
	}
	return "", nil
}

func int32Bytes(ids []int32) []byte {
	out := make([]byte, 4*len(ids))
	for i, id := range ids {
		binary.LittleEndian.PutUint32(out[4*i:], uint32(id))
	}
	return out
}
