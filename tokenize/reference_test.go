package tokenize_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicedata/sluice/tokenize"
)

// python is Debian's interpreter, which has python3-sentencepiece (the
// reference implementation) installed by .ci/deps-python.sh.
const python = "/usr/bin/python3"

// requireSentencePiece skips when the reference is missing on a
// developer's machine; in CI it must be there.
func requireSentencePiece(t testing.TB) {
	t.Helper()
	if err := exec.Command(python, "-c", "import sentencepiece").Run(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("python3-sentencepiece is missing (.ci/deps-python.sh installs it): %v", err)
		}
		t.Skipf("python3-sentencepiece not installed: %v", err)
	}
}

const trainScript = `
import json, sys
import sentencepiece as spm
corpus, prefix, model_type, dummy, texts_path, out_path, vocab, norm, extra = sys.argv[1:10]
spm.SentencePieceTrainer.train(input=corpus, model_prefix=prefix, vocab_size=int(vocab), model_type=model_type,
    normalization_rule_name=norm, add_dummy_prefix=(dummy == "1"), remove_extra_whitespaces=(extra == "1"),
    byte_fallback=True, character_coverage=0.9995, minloglevel=2)
sp = spm.SentencePieceProcessor(model_file=prefix + ".model")
texts = json.load(open(texts_path, encoding="utf-8"))
json.dump({"ids": [sp.encode(t) for t in texts], "eos": sp.eos_id()}, open(out_path, "w"))
`

var words = strings.Fields("the quick brown fox jumps over lazy dog data stream shard token model train loader batch " +
	"épée naïve Zürich 東京 漢字 🙂 12345 3.14 don't e-mail C++ <tag> x_y")

func sentence(rng *rand.Rand) string {
	var b strings.Builder
	for i := range 3 + rng.IntN(18) {
		if i > 0 {
			b.WriteString([]string{" ", " ", " ", "  ", ", "}[rng.IntN(5)])
		}
		b.WriteString(words[rng.IntN(len(words))])
	}
	return b.String()
}

// spec is the training configuration of a reference model.
type spec struct {
	typ, norm         string
	vocab             int
	dummy, foldSpaces bool
}

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// trainReference trains a tiny model with the reference implementation
// and returns its path and the reference ids of texts.
func trainReference(t testing.TB, sp spec, texts []string) (string, [][]int32, int32) {
	t.Helper()
	requireSentencePiece(t)
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(7, 8))
	var corpus strings.Builder
	for range 3000 {
		corpus.WriteString(sentence(rng) + "\n")
	}
	cp := filepath.Join(dir, "corpus.txt")
	tp := filepath.Join(dir, "texts.json")
	op := filepath.Join(dir, "ids.json")
	tj, _ := json.Marshal(texts)
	for p, b := range map[string][]byte{cp: []byte(corpus.String()), tp: tj} {
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	prefix := filepath.Join(dir, "m")
	cmd := exec.Command(python, "-c", trainScript, cp, prefix, sp.typ, flag(sp.dummy), tp, op, fmt.Sprint(sp.vocab), sp.norm, flag(sp.foldSpaces))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("reference training: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(op)
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		IDs [][]int32 `json:"ids"`
		EOS int32     `json:"eos"`
	}
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatal(err)
	}
	return prefix + ".model", ref.IDs, ref.EOS
}

func testTexts() []string {
	rng := rand.New(rand.NewPCG(1, 2))
	texts := []string{"", " ", "  leading and trailing  ", "unseen wörds ÄÖÜ ß Ω λ", "🙂🙂🙂 new 漢字 and 𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "tab\tand\nnewline", "a"}
	for range 300 {
		texts = append(texts, sentence(rng))
	}
	return texts
}

// TestSentencePieceMatchesReference: ids identical to the reference
// implementation's for BPE models it trained (Gemma-like: no dummy
// prefix; Llama-like: dummy prefix; with whitespace folding), unseen
// characters (byte fallback) included.
func TestSentencePieceMatchesReference(t *testing.T) {
	texts := testTexts()
	for name, c := range map[string]spec{
		"gemma": {typ: "bpe", norm: "identity", vocab: 500},
		"llama": {typ: "bpe", norm: "identity", vocab: 500, dummy: true},
		"fold":  {typ: "bpe", norm: "identity", vocab: 400, dummy: true, foldSpaces: true},
	} {
		t.Run(name, func(t *testing.T) {
			model, ref, eos := trainReference(t, c, texts)
			sp, err := tokenize.LoadSentencePiece(model)
			if err != nil {
				t.Fatal(err)
			}
			if sp.EOS() != eos {
				t.Errorf("EOS %d, reference %d", sp.EOS(), eos)
			}
			for i, text := range texts {
				got := sp.Encode(nil, text)
				if fmt.Sprint(got) != fmt.Sprint(ref[i]) {
					t.Fatalf("text %q:\n got %v\nwant %v", text, got, ref[i])
				}
				if text != "" && !c.foldSpaces && sp.Decode(got) != text {
					t.Errorf("decode(encode(%q)) = %q", text, sp.Decode(got))
				}
			}
		})
	}
}

// TestUnsupportedModelsRefused: models the library cannot reproduce are
// refused at load time rather than tokenized differently.
func TestUnsupportedModelsRefused(t *testing.T) {
	for _, c := range []spec{{typ: "unigram", norm: "identity", vocab: 340}, {typ: "bpe", norm: "nmt_nfkc", vocab: 400}} {
		model, _, _ := trainReference(t, c, []string{"x"})
		if _, err := tokenize.LoadSentencePiece(model); !errors.Is(err, tokenize.ErrUnsupportedModel) {
			t.Errorf("%s model, %s normalizer: err = %v, want ErrUnsupportedModel", c.typ, c.norm, err)
		}
	}
	if _, err := tokenize.NewSentencePiece("junk", []byte("not a model")); !errors.Is(err, tokenize.ErrUnsupportedModel) {
		t.Errorf("junk model: %v", err)
	}
}
