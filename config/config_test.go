package config_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicedata/sluice/config"
	"github.com/sluicedata/sluice/internal/s3test"
	"github.com/sluicedata/sluice/internal/stores"
	"github.com/sluicedata/sluice/storage"
)

const good = `# a training job
kind: train
command: [torchrun, --nproc-per-node, "8", train.py]
env:
  AWS_REGION: eu-west-1
dataset:
  remote: s3://bucket/ds
  local: /local/cache/ds
  batch_size: 32
  shuffle: true
  cache_limit: 100gb
  streams:
    - {remote: s3://bucket/a, proportion: 0.75}
training:
  lr: 3.0e-4
  steps: 1000
`

func TestParseGood(t *testing.T) {
	c, err := config.Parse("train.yaml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if c.Kind != "train" || len(c.Command) != 4 || c.Command[2] != "8" || c.Env["AWS_REGION"] != "eu-west-1" {
		t.Errorf("config %+v", c)
	}
	want := []struct {
		name string
		val  string
		line int
	}{{"remote", "s3://bucket/ds", 7}, {"local", "/local/cache/ds", 8}, {"batch_size", "32", 9}, {"shuffle", "true", 10},
		{"cache_limit", "100gb", 11}, {"streams", "[map[proportion:0.75 remote:s3://bucket/a]]", 12}}
	if len(c.Dataset) != len(want) {
		t.Fatalf("dataset %+v", c.Dataset)
	}
	for i, w := range want {
		f := c.Dataset[i]
		if f.Name != w.name || fmt.Sprint(f.Value) != w.val || f.Line != w.line {
			t.Errorf("dataset[%d] = %+v, want %+v", i, f, w)
		}
	}
	if _, ok := c.Dataset[2].Value.(int); !ok {
		t.Errorf("batch_size decoded as %T", c.Dataset[2].Value)
	}
	tr, ok := c.Training.(map[string]any)
	if !ok || tr["steps"] != 1000 || tr["lr"] != 3.0e-4 {
		t.Errorf("training %#v", c.Training)
	}
}

func TestParseFlags(t *testing.T) {
	c, err := config.Parse("c.yaml", []byte("kind: convert\nargs: [in.jsonl, s3://b/out]\nflags:\n  part: 3/16\n  --column: [a, b]\n  workers: 8\n"))
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(c.Flags)
	if want := "[{part [3/16] 4} {column [a b] 5} {workers [8] 6}]"; got != want {
		t.Errorf("flags %s, want %s", got, want)
	}
}

func TestParseErrorsHaveLines(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		line      int
		msg       string
	}{
		{"unknown key", "kind: stream\nargs: [x]\nflagz: {}\n", 3, "flagz"},
		{"wrong type", "kind: stream\nargs: 5\n", 2, "cannot unmarshal"},
		{"wrong type in list", "kind: train\ncommand: [a, {b: c}]\n", 2, "cannot unmarshal"},
		{"env not a map", "kind: stream\nenv: [a]\n", 2, "cannot unmarshal"},
		{"duplicate key", "kind: stream\nkind: convert\n", 2, "already defined"},
		{"second document", "kind: stream\n---\nkind: convert\n", 2, "second YAML document"},
		{"flag map value", "kind: stream\nflags:\n  x:\n    y: 1\n", 4, "flags.x"},
		{"duplicate flag", "kind: stream\nflags:\n  x: 1\n  --x: 2\n", 4, "already defined"},
		{"duplicate dataset key", "kind: train\ncommand: [x]\ndataset:\n  remote: a\n  remote: b\n", 5, "already defined"},
		{"flag null", "kind: stream\nflags:\n  x:\n", 3, "no value"},
		{"dataset not a map", "kind: train\ncommand: [x]\ndataset: [1]\n", 3, "dataset"},
		{"dataset key not a string", "kind: train\ncommand: [x]\ndataset:\n  1: 2\n", 4, "names must be strings"},
		{"syntax", "kind: stream\nargs: [x\n", 2, "did not find expected"},
		{"syntax later", "kind: stream\n\n\nargs: [x\n", 4, "did not find expected"},
		{"scanner", "kind: stream\nargs: x: y\n", 2, "mapping values"},
		{"unknown kind", "kind: fly\n", 0, "kind \"fly\""},
		{"no kind", "args: [x]\n", 0, "kind \"\""},
		{"empty", "", 0, "empty"},
		{"train without command", "kind: train\n", 0, "needs command"},
		{"command on convert", "kind: convert\ncommand: [x]\n", 0, "for kind train"},
		{"train with flags", "kind: train\ncommand: [x]\nflags: {a: 1}\n", 0, "not args"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse("job.yaml", []byte(tc.doc))
			var ce *config.Error
			if !errors.As(err, &ce) || !errors.Is(err, config.ErrInvalid) {
				t.Fatalf("error %v (%T), want *config.Error", err, err)
			}
			if ce.Line != tc.line || !strings.Contains(ce.Msg, tc.msg) || ce.Source != "job.yaml" {
				t.Errorf("error %q: line %d, want %d with %q", err, ce.Line, tc.line, tc.msg)
			}
		})
	}
}

func TestParseBounds(t *testing.T) {
	big := "kind: stream\nargs: [" + strings.Repeat("x,", config.MaxSize/2) + "x]\n"
	if _, err := config.Parse("big.yaml", []byte(big)); !errors.Is(err, config.ErrInvalid) {
		t.Errorf("a file over MaxSize: %v", err)
	}
	// Alias expansion (a "billion laughs" document) is refused, not expanded.
	bomb := "kind: train\ncommand: [x]\ntraining:\n  a: &a [x, x, x, x, x, x, x, x, x, x]\n"
	prev := "a"
	for i := range 12 {
		n := fmt.Sprintf("b%d", i)
		bomb += fmt.Sprintf("  %s: &%s [*%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s]\n", n, n, prev, prev, prev, prev, prev, prev, prev, prev, prev, prev)
		prev = n
	}
	done := make(chan error, 1)
	go func() { _, err := config.Parse("bomb.yaml", []byte(bomb)); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Error("an alias bomb was accepted")
		}
	case <-time.After(60 * time.Second):
		t.Fatal("an alias bomb is still expanding after 60s")
	}
}

func TestLoadLocal(t *testing.T) {
	p := filepath.Join(t.TempDir(), "train.yaml")
	if err := os.WriteFile(p, []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(context.Background(), nil, p)
	if err != nil || c.Source != p || c.Kind != "train" {
		t.Fatalf("%+v, %v", c, err)
	}
	if _, err := config.Load(context.Background(), nil, p+".missing"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

// TestLoadS3 reads a config from the real S3 server of .ci/services.sh.
func TestLoadS3(t *testing.T) {
	srv := s3test.Require(t)
	srv.SetCredentialEnv(t)
	t.Setenv("S3_ENDPOINT_URL", srv.Endpoint)
	t.Setenv("AWS_REGION", srv.Region)
	ctx := context.Background()
	reg := stores.Default()
	open := func(ctx context.Context, u string) (storage.Bucket, error) { return stores.Open(ctx, reg, u, nil) }
	dir := fmt.Sprintf("s3://%s/config-test-%d/configs", srv.Bucket, time.Now().UnixNano())
	b, err := open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for name, doc := range map[string]string{"train.yaml": good, "bad.yaml": "kind: train\ncommand: [x]\nbogus: 1\n"} {
		w, err := b.NewWriter(ctx, name, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(doc)); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	c, err := config.Load(ctx, open, dir+"/train.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Kind != "train" || len(c.Dataset) != 6 || c.Source != dir+"/train.yaml" {
		t.Errorf("%+v", c)
	}
	var ce *config.Error
	if _, err := config.Load(ctx, open, dir+"/bad.yaml"); !errors.As(err, &ce) || ce.Line != 3 {
		t.Errorf("bad.yaml from S3: %v", err)
	}
	if _, err := config.Load(ctx, open, dir+"/none.yaml"); !errors.Is(err, storage.ErrNotExist) {
		t.Errorf("missing object: %v", err)
	}
	if _, err := config.Load(ctx, open, "s3://x.yaml"); !errors.Is(err, config.ErrInvalid) {
		t.Errorf("bucket-less URL: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(good))
	f.Add([]byte("kind: convert\nflags: {part: 1/2}\n"))
	f.Add([]byte("kind: stream\n---\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := config.Parse("fuzz.yaml", data)
		if err == nil && c == nil {
			t.Fatal("nil config without error")
		}
		if err != nil && !errors.Is(err, config.ErrInvalid) {
			t.Fatalf("error %v does not match ErrInvalid", err)
		}
	})
}
