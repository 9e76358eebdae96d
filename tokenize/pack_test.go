package tokenize_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sluicedata/sluice/tokenize"
)

func TestPacker(t *testing.T) {
	docs := [][]int32{{1, 2, 3}, {}, {4, 5, 6, 7, 8, 9, 10}, {11}}
	var want []int32
	for _, d := range docs {
		want = append(append(want, d...), 99)
	}
	for _, keep := range []bool{true, false} {
		for n := 1; n <= 16; n++ {
			p, err := tokenize.NewPacker(n, 99)
			if err != nil {
				t.Fatal(err)
			}
			var got []int32
			emit := func(b []int32) error {
				if len(b) != n && !keep {
					t.Fatalf("n=%d: partial block %v emitted", n, b)
				}
				got = append(got, b...)
				return nil
			}
			for _, d := range docs {
				if err := p.Add(d, emit); err != nil {
					t.Fatal(err)
				}
			}
			dropped, err := p.Flush(keep, emit)
			if err != nil {
				t.Fatal(err)
			}
			full := len(want) / n * n
			switch {
			case keep && !slices.Equal(got, want):
				t.Fatalf("n=%d keep: got %v, want %v", n, got, want)
			case !keep && (!slices.Equal(got, want[:full]) || dropped != len(want)-full):
				t.Fatalf("n=%d drop: got %v (dropped %d), want %v", n, got, dropped, want[:full])
			}
		}
	}
	if _, err := tokenize.NewPacker(0, 1); err == nil {
		t.Fatal("block length 0 accepted")
	}
	if _, err := tokenize.NewPacker(8, -1); err == nil {
		t.Fatal("packing without EOS accepted")
	}
}

// FuzzSentencePiece loads arbitrary bytes as a model and encodes text with
// what loads: nothing may panic, every id is a valid piece.
func FuzzSentencePiece(f *testing.F) {
	f.Add([]byte{}, "hello")
	f.Add([]byte("\x0a\x05\x0a\x01a\x18\x01"), "a b")
	f.Fuzz(func(t *testing.T, model []byte, text string) {
		sp, err := tokenize.NewSentencePiece("fuzz", model)
		if err != nil {
			return
		}
		for _, id := range sp.Encode(nil, text) {
			if id < 0 || int(id) >= sp.VocabSize() {
				t.Fatalf("id %d outside the vocabulary of %d", id, sp.VocabSize())
			}
		}
	})
}

// BenchmarkEncode measures tokens/s of a reference-trained BPE model on
// English-like text, on all cores.
func BenchmarkEncode(b *testing.B) {
	model, _, _ := trainReference(b, spec{typ: "bpe", norm: "identity", vocab: 500}, []string{"x"})
	sp, err := tokenize.LoadSentencePiece(model)
	if err != nil {
		b.Fatal(err)
	}
	var docs []string
	for i := range 256 {
		docs = append(docs, strings.Repeat(fmt.Sprintf("the quick brown fox %d jumps over the lazy dog, data stream shard token. ", i), 8))
	}
	tokens := 0
	for _, d := range docs {
		tokens += len(sp.Encode(nil, d))
	}
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var buf []int32
		i := 0
		for pb.Next() {
			buf = sp.Encode(buf[:0], docs[i%len(docs)])
			i++
		}
	})
	b.ReportMetric(float64(tokens)/float64(len(docs))*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
}
