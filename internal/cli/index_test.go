package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func wdsFixtureDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join("..", "..", "..", "shared", "fixtures", "wds")
	if _, err := os.Stat(dir); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("reference fixtures missing: %v", err)
		}
		t.Skipf("reference fixtures missing: %v", err)
	}
	return dir
}

func jsonLines(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%v: %.200s", err, sc.Text())
		}
		out = append(out, m)
	}
	return out
}

// sameDecoded compares a dumped field value with webdataset's: images by
// shape exactly and means within tol, everything else exactly.
func sameDecoded(got, want any, tol float64) bool {
	g, gok := got.(map[string]any)
	w, wok := want.(map[string]any)
	if gok && wok && w["mean"] != nil {
		if !reflect.DeepEqual(g["shape"], w["shape"]) || g["dtype"] != w["dtype"] {
			return false
		}
		gm, _ := g["mean"].([]any)
		wm, _ := w["mean"].([]any)
		if len(gm) != len(wm) {
			return false
		}
		for i := range gm {
			if math.Abs(gm[i].(float64)-wm[i].(float64)) > tol {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(got, want)
}

// TestDumpTarFixtures: sluice dump of each reference tar dataset matches
// what webdataset's .decode("rgb8") gave, and sluice index then verify
// accept it.
func TestDumpTarFixtures(t *testing.T) {
	root := wdsFixtureDir(t)
	for _, name := range []string{"images", "mixed", "gnutar_pax"} {
		t.Run(name, func(t *testing.T) {
			var meta struct {
				URLs string `json:"urls"`
			}
			mb, _ := os.ReadFile(filepath.Join(root, name, "meta.json"))
			if err := json.Unmarshal(mb, &meta); err != nil {
				t.Fatal(err)
			}
			// A copy: sluice index writes beside the shards.
			dir := t.TempDir()
			tars, _ := filepath.Glob(filepath.Join(root, name, "data", "*.tar"))
			for _, p := range tars {
				b, _ := os.ReadFile(p)
				os.WriteFile(filepath.Join(dir, filepath.Base(p)), b, 0o644)
			}
			pattern := filepath.Join(dir, strings.TrimPrefix(meta.URLs, "data/"))
			var out, errb bytes.Buffer
			if err := Run(context.Background(), []string{"dump", pattern}, &out, &errb); err != nil {
				t.Fatalf("dump: %v: %s", err, errb.String())
			}
			got := jsonLines(t, out.Bytes())
			wb, _ := os.ReadFile(filepath.Join(root, name, "expected.jsonl"))
			want := jsonLines(t, wb)
			if len(got) != len(want) {
				t.Fatalf("%d lines, want %d", len(got), len(want))
			}
			for i := range want {
				if got[i]["key"] != want[i]["key"] || got[i]["url"] != want[i]["url"] {
					t.Fatalf("line %d: key %v url %v, want %v %v", i, got[i]["key"], got[i]["url"], want[i]["key"], want[i]["url"])
				}
				gf, wf := got[i]["fields"].(map[string]any), want[i]["fields"].(map[string]any)
				if len(gf) != len(wf) {
					t.Errorf("line %d: fields %v, want %v", i, keysOf(gf), keysOf(wf))
				}
				for f, wv := range wf {
					g, _ := gf[f].(map[string]any)
					w := wv.(map[string]any)
					tol := 1e-4
					if strings.HasSuffix(f, "jpg") || strings.HasSuffix(f, "jpeg") {
						tol = 3.0
					}
					if g == nil || g["raw_len"] != w["raw_len"] || g["raw_sha256"] != w["raw_sha256"] || !sameDecoded(g["v"], w["v"], tol) {
						t.Errorf("line %d field %q: got %v\nwant %v", i, f, g, w)
					}
				}
			}
			out.Reset()
			if err := Run(context.Background(), []string{"index", pattern}, &out, &errb); err != nil {
				t.Fatalf("index: %v: %s", err, errb.String())
			}
			if err := Run(context.Background(), []string{"verify", dir}, &out, &errb); err != nil {
				t.Fatalf("verify: %v: %s %s", err, out.String(), errb.String())
			}
			// Dump through the index beside the shards gives the same lines.
			var again bytes.Buffer
			if err := Run(context.Background(), []string{"dump", dir}, &again, &errb); err != nil {
				t.Fatal(err)
			}
			if len(jsonLines(t, again.Bytes())) != len(want) {
				t.Fatalf("dump of the indexed directory differs")
			}
		})
	}
}

func keysOf(m map[string]any) []string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	return k
}

// TestIndexOut: --out above the shards' directory writes basenames relative
// to it (the index opens there as a dataset); --out elsewhere is refused.
func TestIndexOut(t *testing.T) {
	root := wdsFixtureDir(t)
	top := t.TempDir()
	sub := filepath.Join(top, "train")
	os.MkdirAll(sub, 0o755)
	tars, _ := filepath.Glob(filepath.Join(root, "images", "data", "*.tar"))
	for _, p := range tars {
		b, _ := os.ReadFile(p)
		os.WriteFile(filepath.Join(sub, filepath.Base(p)), b, 0o644)
	}
	var out, errb bytes.Buffer
	pattern := filepath.Join(sub, "shard-{000000..000002}.tar")
	if err := Run(context.Background(), []string{"index", pattern, "--out", filepath.Join(top, "index.json")}, &out, &errb); err != nil {
		t.Fatalf("index --out: %v %s", err, errb.String())
	}
	b, err := os.ReadFile(filepath.Join(top, "index.json"))
	if err != nil || !strings.Contains(string(b), `"basename": "train/shard-000000.tar"`) {
		t.Fatalf("index at the top: %v %.300s", err, b)
	}
	out.Reset()
	if err := Run(context.Background(), []string{"verify", top}, &out, &errb); err != nil {
		t.Fatalf("verify: %v %s", err, out.String())
	}
	err = Run(context.Background(), []string{"index", pattern, "--out", filepath.Join(sub, "deeper", "index.json")}, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "--out") {
		t.Fatalf("index --out below the shards: %v", err)
	}
}
