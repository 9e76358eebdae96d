package convert

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sluicedata/sluice/format"
)

const refTokenize = `
import json, sys
import sentencepiece as spm
corpus, prefix, docs_path, out_path = sys.argv[1:5]
spm.SentencePieceTrainer.train(input=corpus, model_prefix=prefix, vocab_size=300, model_type="bpe",
    normalization_rule_name="identity", add_dummy_prefix=True, remove_extra_whitespaces=False,
    byte_fallback=True, character_coverage=0.9995, minloglevel=2)
sp = spm.SentencePieceProcessor(model_file=prefix + ".model")
docs = [json.loads(l)["text"] for l in open(docs_path, encoding="utf-8")]
json.dump({"ids": [sp.encode(d) for d in docs], "eos": sp.eos_id()}, open(out_path, "w"))
`

// tokenizeFixture writes n JSON-lines documents, trains a SentencePiece
// BPE model on them with Debian's python3-sentencepiece and returns the
// input, the model and the reference ids of every document.
func tokenizeFixture(t testing.TB, n int) (in, model string, ref [][]int32, eos int32) {
	t.Helper()
	if err := exec.Command("/usr/bin/python3", "-c", "import sentencepiece").Run(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("python3-sentencepiece missing (.ci/deps-python.sh installs it): %v", err)
		}
		t.Skipf("python3-sentencepiece not installed: %v", err)
	}
	dir := t.TempDir()
	words := strings.Fields("stream shard token model train loader batch épée 東京 🙂 data the a of and 42")
	rng := rand.New(rand.NewPCG(3, 4))
	var docs, corpus strings.Builder
	for i := range n {
		var d strings.Builder
		for j := range 1 + rng.IntN(30) {
			if j > 0 {
				d.WriteString(" ")
			}
			d.WriteString(words[rng.IntN(len(words))])
		}
		fmt.Fprintf(&docs, "{\"id\": %d, \"text\": %q}\n", i, d.String())
		corpus.WriteString(d.String() + "\n")
	}
	in = filepath.Join(dir, "docs.jsonl")
	writeFile(t, in, []byte(docs.String()))
	cp := filepath.Join(dir, "corpus.txt")
	writeFile(t, cp, []byte(corpus.String()))
	prefix := filepath.Join(dir, "tok")
	out := filepath.Join(dir, "ref.json")
	if b, err := exec.Command("/usr/bin/python3", "-c", refTokenize, cp, prefix, in, out).CombinedOutput(); err != nil {
		t.Fatalf("reference: %v\n%s", err, b)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		IDs [][]int32 `json:"ids"`
		EOS int32     `json:"eos"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	return in, prefix + ".model", r.IDs, r.EOS
}

func int32sOf(t testing.TB, v any) []int32 {
	t.Helper()
	a, ok := v.(*format.NDArray)
	if !ok || a.DType != "int32" || len(a.Shape) != 1 {
		t.Fatalf("ids column is %#v, want a 1-d int32 ndarray", v)
	}
	out := make([]int32, a.Shape[0])
	for i := range out {
		out[i] = int32(binary.LittleEndian.Uint32(a.Data[4*i:]))
	}
	return out
}

// TestTokenizeColumn: --tokenize text=MODEL writes text_input_ids with
// the reference implementation's ids, beside the other columns.
func TestTokenizeColumn(t *testing.T) {
	in, model, ref, _ := tokenizeFixture(t, 500)
	out := filepath.Join(t.TempDir(), "out")
	rep := runConvert(t, &Options{Input: in, Output: out, Tokenize: []TokenizeColumn{{Column: "text", Model: model}}, BatchSize: 37})
	var total int64
	for _, r := range ref {
		total += int64(len(r))
	}
	if rep.Tokens != total {
		t.Errorf("report counts %d tokens, reference %d", rep.Tokens, total)
	}
	got := readDataset(t, out)
	if len(got) != len(ref) {
		t.Fatalf("%d samples, want %d", len(got), len(ref))
	}
	for i, s := range got {
		if s["id"] != int64(i) {
			t.Fatalf("sample %d has id %v", i, s["id"])
		}
		if ids := int32sOf(t, s["text_input_ids"]); !slices.Equal(ids, ref[i]) {
			t.Fatalf("sample %d: ids %v, reference %v", i, ids, ref[i])
		}
	}
}

// TestTokenizePack: --pack N concatenates documents with EOS and cuts
// blocks of N, no token lost; the last partial block is kept or dropped;
// an interrupted packed conversion resumes to the same bytes.
func TestTokenizePack(t *testing.T) {
	in, model, ref, eos := tokenizeFixture(t, 2000)
	var stream []int32
	for _, r := range ref {
		stream = append(append(stream, r...), eos)
	}
	const n = 64
	dir := t.TempDir()
	opts := func(out string, drop bool) *Options {
		return &Options{Input: in, Output: out, Tokenize: []TokenizeColumn{{Column: "text", Model: model}},
			Pack: n, PackDropLast: drop, SizeLimit: 8 << 10, BatchSize: 50}
	}
	for _, drop := range []bool{false, true} {
		out := filepath.Join(dir, fmt.Sprint("drop-", drop))
		rep := runConvert(t, opts(out, drop))
		var got []int32
		for i, s := range readDataset(t, out) {
			ids := int32sOf(t, s["text_input_ids"])
			if len(ids) != n && (drop || i != int(rep.SamplesOut)-1) {
				t.Fatalf("block %d has %d ids", i, len(ids))
			}
			got = append(got, ids...)
		}
		want := stream
		if drop {
			want = stream[:len(stream)/n*n]
		}
		if !slices.Equal(got, want) {
			t.Fatalf("drop=%v: %d packed ids differ from the %d of the reference stream", drop, len(got), len(want))
		}
		if rep.Tokens != int64(len(stream)) || rep.Shards < 3 {
			t.Fatalf("report: %d tokens (want %d), %d shards", rep.Tokens, len(stream), rep.Shards)
		}
		if drop && rep.TokensDropped != int64(len(stream)%n) {
			t.Fatalf("dropped %d tokens, want %d", rep.TokensDropped, len(stream)%n)
		}
	}

	// Interrupted after shard 2's journal entry, then run again.
	out := filepath.Join(dir, "resumed")
	ctx, cancel := context.WithCancel(context.Background())
	o := opts(out, false)
	o.Registry = testRegistry()
	o.testHook = func(ev string, shard int) {
		if ev == "journal" && shard == 2 {
			cancel()
		}
	}
	if _, err := Run(ctx, o); err == nil {
		t.Fatal("the interrupted run finished")
	}
	rep := runConvert(t, opts(out, false))
	if rep.ResumedShards < 3 {
		t.Fatalf("resumed after %d shards, want at least 3", rep.ResumedShards)
	}
	sameDataFiles(t, filepath.Join(dir, "drop-false"), out)
}
