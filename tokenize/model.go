// Package tokenize turns text into token ids inside the conversion
// pipeline, and packs token streams into fixed-length blocks for LLM
// pre-training.
//
// Models are SentencePiece model files (the format of the Gemma, Llama and
// T5 tokenizers). The reader here is pure Go, on the protobuf wire format
// (google.golang.org/protobuf/encoding/protowire), and implements the
// reference implementation's BPE encoding: user-defined symbols, merges by
// score (ties to the left), resegmentation of unused pieces, byte
// fallback, the dummy prefix and whitespace folding of the normalizer. Its
// ids are checked against the reference implementation (Debian's
// python3-sentencepiece) in the tests.
//
// Models whose encoding it does not reproduce exactly are refused when
// loaded, never tokenized differently: unigram, word and char models (T5),
// normalizers with a character map (nmt_nfkc; "identity" has none), BPE
// models without byte fallback, and whitespace-as-suffix models. Gemma's
// and Llama 2's tokenizers are BPE with byte fallback and an identity
// normalizer.
//
// (github.com/eliben/go-sentencepiece, the pure-Go library considered
// first, panics on models whose longest piece is shorter than two merged
// symbols and supports neither the dummy prefix nor whitespace folding.)
package tokenize

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// MaxModelBytes bounds a model file.
const MaxModelBytes = 256 << 20

// ErrUnsupportedModel is matched by the error for a model file this
// package cannot reproduce exactly, or that is not a SentencePiece model.
var ErrUnsupportedModel = errors.New("tokenize: unsupported tokenizer model")

// Piece types of the model format.
const (
	typeNormal      = 1
	typeUnknown     = 2
	typeControl     = 3
	typeUserDefined = 4
	typeUnused      = 5
	typeByte        = 6
)

type piece struct {
	text  string
	score float32
	typ   int
}

// SentencePiece is a loaded SentencePiece BPE model. It is safe for
// concurrent use.
type SentencePiece struct {
	name   string
	pieces []piece
	ids    map[string]int32 // normal, user-defined and unused pieces
	user   map[string]bool  // user-defined symbols, matched whole
	maxUDS int              // longest user-defined symbol, bytes
	bytes  [256]int32       // byte-fallback pieces
	unk    int32
	bos    int32
	eos    int32

	addDummyPrefix, removeExtraWhitespaces, escapeWhitespaces bool
}

// LoadSentencePiece reads the SentencePiece model file at path.
func LoadSentencePiece(path string) (*SentencePiece, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tokenize: %w", err)
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, MaxModelBytes+1))
	if err != nil {
		return nil, fmt.Errorf("tokenize: read %s: %w", path, err)
	}
	if len(raw) > MaxModelBytes {
		return nil, fmt.Errorf("tokenize: %s is larger than %d bytes", path, MaxModelBytes)
	}
	return NewSentencePiece(path, raw)
}

// fields calls fn for every field of a protobuf message.
func fields(b []byte, fn func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var v []byte
		var x uint64
		switch typ {
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		case protowire.Fixed32Type:
			var y uint32
			y, n = protowire.ConsumeFixed32(b)
			x = uint64(y)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if err := fn(num, typ, v, x); err != nil {
			return err
		}
	}
	return nil
}

// NewSentencePiece loads a model from its serialized bytes; name is used
// in messages.
func NewSentencePiece(name string, model []byte) (*SentencePiece, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrUnsupportedModel, name, fmt.Sprintf(format, a...))
	}
	sp := &SentencePiece{name: name, ids: map[string]int32{}, user: map[string]bool{}, unk: -1, bos: -1, eos: -1,
		addDummyPrefix: true, removeExtraWhitespaces: true, escapeWhitespaces: true}
	modelType, byteFallback, suffix := uint64(1), false, false
	eosID, bosID := int64(2), int64(1)
	var charsmap int
	var normName string
	err := fields(model, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case 1: // pieces
			p := piece{typ: typeNormal}
			err := fields(v, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
				switch {
				case num == 1 && typ == protowire.BytesType:
					p.text = string(v)
				case num == 2 && typ == protowire.Fixed32Type:
					p.score = math.Float32frombits(uint32(x))
				case num == 3 && typ == protowire.VarintType:
					p.typ = int(x)
				}
				return nil
			})
			if err != nil {
				return err
			}
			sp.pieces = append(sp.pieces, p)
		case 2: // trainer spec
			return fields(v, func(num protowire.Number, typ protowire.Type, _ []byte, x uint64) error {
				if typ != protowire.VarintType {
					return nil
				}
				switch num {
				case 3:
					modelType = x
				case 24:
					suffix = x != 0
				case 35:
					byteFallback = x != 0
				case 41:
					bosID = int64(int32(x))
				case 42:
					eosID = int64(int32(x))
				}
				return nil
			})
		case 3: // normalizer spec
			return fields(v, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
				switch {
				case num == 1 && typ == protowire.BytesType:
					normName = string(v)
				case num == 2 && typ == protowire.BytesType:
					charsmap = len(v)
				case num == 3 && typ == protowire.VarintType:
					sp.addDummyPrefix = x != 0
				case num == 4 && typ == protowire.VarintType:
					sp.removeExtraWhitespaces = x != 0
				case num == 5 && typ == protowire.VarintType:
					sp.escapeWhitespaces = x != 0
				}
				return nil
			})
		}
		return nil
	})
	switch {
	case err != nil:
		return nil, bad("not a SentencePiece model: %v", err)
	case len(sp.pieces) == 0:
		return nil, bad("not a SentencePiece model: no pieces")
	case len(sp.pieces) > math.MaxInt32:
		return nil, bad("too many pieces")
	case modelType != 2:
		return nil, bad("model type %d is not BPE (unigram, word and char models are not supported)", modelType)
	case charsmap > 0:
		return nil, bad("normalizer %q maps characters; only the identity normalizer is supported", normName)
	case !byteFallback:
		return nil, bad("BPE without byte fallback is not supported")
	case suffix:
		return nil, bad("whitespace-as-suffix models are not supported")
	}
	for i := range sp.bytes {
		sp.bytes[i] = -1
	}
	for i, p := range sp.pieces {
		id := int32(i)
		switch p.typ {
		case typeNormal, typeUserDefined, typeUnused:
			if _, dup := sp.ids[p.text]; !dup {
				sp.ids[p.text] = id
			}
			if p.typ == typeUserDefined {
				sp.user[p.text] = true
				sp.maxUDS = max(sp.maxUDS, len(p.text))
			}
		case typeUnknown:
			if sp.unk >= 0 {
				return nil, bad("two unknown pieces")
			}
			sp.unk = id
		case typeByte:
			var b int
			if _, err := fmt.Sscanf(p.text, "<0x%02X>", &b); err != nil || len(p.text) != 6 || b < 0 || b > 255 {
				return nil, bad("bad byte piece %q", p.text)
			}
			sp.bytes[b] = id
		case typeControl:
		default:
			return nil, bad("piece %d has unknown type %d", i, p.typ)
		}
	}
	if sp.unk < 0 {
		return nil, bad("no unknown piece")
	}
	for b, id := range sp.bytes {
		if id < 0 {
			return nil, bad("byte fallback without a piece for byte 0x%02X", b)
		}
	}
	control := func(id int64) int32 {
		if id >= 0 && id < int64(len(sp.pieces)) && sp.pieces[id].typ == typeControl {
			return int32(id)
		}
		return -1
	}
	sp.bos, sp.eos = control(bosID), control(eosID)
	return sp, nil
}

// Name returns the model's file name.
func (s *SentencePiece) Name() string { return s.name }

// EOS returns the end-of-sequence id, or -1 when the model has none.
func (s *SentencePiece) EOS() int32 { return s.eos }

// BOS returns the beginning-of-sequence id, or -1 when the model has none.
func (s *SentencePiece) BOS() int32 { return s.bos }

// VocabSize returns the number of pieces of the model.
func (s *SentencePiece) VocabSize() int { return len(s.pieces) }

// normalize applies the identity normalizer's whitespace rules.
func (s *SentencePiece) normalize(text string) string {
	if s.removeExtraWhitespaces {
		var b strings.Builder
		b.Grow(len(text))
		space := false
		for _, f := range strings.Split(text, " ") {
			if f == "" {
				continue
			}
			if space {
				b.WriteByte(' ')
			}
			b.WriteString(f)
			space = true
		}
		text = b.String()
	}
	if text == "" {
		return ""
	}
	if s.addDummyPrefix {
		text = " " + text
	}
	if s.escapeWhitespaces {
		text = strings.ReplaceAll(text, " ", "\u2581")
	}
	return text
}

// Decode returns the text of ids (byte pieces joined back into UTF-8,
// control and unknown pieces left out, the dummy prefix removed).
func (s *SentencePiece) Decode(ids []int32) string {
	var b []byte
	for _, id := range ids {
		if id < 0 || int(id) >= len(s.pieces) {
			continue
		}
		p := s.pieces[id]
		switch p.typ {
		case typeByte:
			var v int
			fmt.Sscanf(p.text, "<0x%02X>", &v)
			b = append(b, byte(v))
		case typeNormal, typeUserDefined, typeUnused:
			b = append(b, p.text...)
		}
	}
	out := string(b)
	if s.escapeWhitespaces {
		out = strings.ReplaceAll(out, "\u2581", " ")
	}
	if s.addDummyPrefix {
		out = strings.TrimPrefix(out, " ")
	}
	if !utf8.ValidString(out) {
		out = strings.ToValidUTF8(out, "\uFFFD")
	}
	return out
}
