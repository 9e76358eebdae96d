// Package config reads the YAML job files that `sluice run` executes and
// that the Python client's StreamingDataset.from_config reads: one file per
// pipeline (convert, stream, bench, serve, train), which may live in object
// storage, so that one container image runs any of them.
//
// Parsing is strict: an unknown key, a value of the wrong type, a duplicate
// key or a second document is an *Error carrying the file and line.
//
//	kind: convert                     # convert | stream | bench | serve | train
//	args: [data.jsonl, s3://b/ds]     # positional arguments of the command
//	flags:                            # the command's flags (sluice convert --help)
//	  part: 3/16
//	env: {AWS_REGION: eu-west-1}      # environment of the command
//	command: [torchrun, train.py]     # kind train: the program to run
//	dataset: {remote: s3://b/ds, batch_size: 32}   # StreamingDataset arguments
//	training: {lr: 3e-4}              # free-form: the training script's own
package config

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/sluicedata/sluice/storage"
)

// MaxSize bounds a config file.
const MaxSize = 1 << 20

// ErrInvalid is matched (errors.Is) by every *Error.
var ErrInvalid = errors.New("config: invalid")

// Error is a problem in a config file, at a line (0 when the file as a
// whole is at fault).
type Error struct {
	Source string // file name or URL
	Line   int
	Msg    string
}

// Error formats "SOURCE:LINE: MSG".
func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("config %s:%d: %s", e.Source, e.Line, e.Msg)
	}
	return fmt.Sprintf("config %s: %s", e.Source, e.Msg)
}

// Is matches ErrInvalid.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

// Kinds of job a config runs, and the sluice command each maps to ("" for
// train, which runs Command).
var Kinds = map[string]string{
	"convert": "convert",
	"stream":  "stream",
	"bench":   "bench",
	"serve":   "agent",
	"train":   "",
}

// Flag is one entry of the flags section: a command-line flag and its
// value(s) (a list gives a repeatable flag several values).
type Flag struct {
	Name   string
	Values []string
	Line   int
}

// Field is one entry of the dataset section: a StreamingDataset argument
// and its value as decoded from YAML (string, int, float64, bool, nil,
// []any or map[string]any).
type Field struct {
	Name  string
	Value any
	Line  int
}

// Config is a parsed job file.
type Config struct {
	Source  string
	Kind    string
	Args    []string
	Flags   []Flag
	Env     map[string]string
	Command []string
	// Dataset holds the dataset section's fields in file order.
	Dataset []Field
	// Training is the training section, decoded but not checked.
	Training any
}

// file is the document's shape; KnownFields rejects any other key.
type file struct {
	Kind     string            `yaml:"kind"`
	Args     []string          `yaml:"args"`
	Flags    yaml.Node         `yaml:"flags"`
	Env      map[string]string `yaml:"env"`
	Command  []string          `yaml:"command"`
	Dataset  yaml.Node         `yaml:"dataset"`
	Training yaml.Node         `yaml:"training"`
}

// Parse parses a job file; source names it in errors.
func Parse(source string, data []byte) (*Config, error) {
	bad := func(line int, format string, a ...any) error {
		return &Error{Source: source, Line: line, Msg: fmt.Sprintf(format, a...)}
	}
	if len(data) > MaxSize {
		return nil, bad(0, "larger than %d bytes", MaxSize)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var f file
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, bad(0, "empty file (want at least kind:)")
		}
		return nil, yamlError(source, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		line := extra.Line
		if err != nil {
			return nil, yamlError(source, err)
		}
		return nil, bad(line, "a second YAML document: one job per file")
	}
	c := &Config{Source: source, Kind: f.Kind, Args: f.Args, Env: f.Env, Command: f.Command}
	if _, ok := Kinds[c.Kind]; !ok {
		return nil, bad(0, "kind %q: want one of %s", c.Kind, kindList())
	}
	var err error
	if c.Flags, err = parseFlags(source, &f.Flags); err != nil {
		return nil, err
	}
	if c.Dataset, err = parseDataset(source, &f.Dataset); err != nil {
		return nil, err
	}
	if f.Training.Kind != 0 {
		if err := f.Training.Decode(&c.Training); err != nil {
			return nil, yamlError(source, err)
		}
	}
	for k := range c.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return nil, bad(0, "env: %q is not a variable name", k)
		}
	}
	switch {
	case c.Kind == "train" && len(c.Command) == 0:
		return nil, bad(0, "kind train needs command: (the program to run, e.g. [torchrun, --nproc-per-node, \"8\", train.py])")
	case c.Kind != "train" && len(c.Command) > 0:
		return nil, bad(0, "command: is for kind train; kind %s runs sluice %s", c.Kind, Kinds[c.Kind])
	case c.Kind == "train" && (len(c.Args) > 0 || len(c.Flags) > 0):
		return nil, bad(0, "kind train takes command:, not args: or flags:")
	}
	return c, nil
}

func kindList() string {
	ks := make([]string, 0, len(Kinds))
	for k := range Kinds {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return strings.Join(ks, ", ")
}

// yamlError turns the YAML library's errors ("yaml: line 3: ...") into an
// *Error with the line.
func yamlError(source string, err error) error {
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		return lineError(source, te.Errors[0])
	}
	return lineError(source, err.Error())
}

func lineError(source, msg string) error {
	msg = strings.TrimPrefix(msg, "yaml: ")
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		num, tail, _ := strings.Cut(rest, ":")
		if n, err := strconv.Atoi(num); err == nil {
			tail = strings.TrimSpace(tail)
			// The library reports a parser error ("did not find expected
			// ...") at the 0-based line of the construct it was in.
			if strings.HasPrefix(tail, "did not find expected") {
				n++
			}
			return &Error{Source: source, Line: n, Msg: tail}
		}
	}
	return &Error{Source: source, Msg: msg}
}

func parseFlags(source string, n *yaml.Node) ([]Flag, error) {
	if n.Kind == 0 {
		return nil, nil
	}
	if n.Kind != yaml.MappingNode {
		return nil, &Error{Source: source, Line: n.Line, Msg: "flags: want a mapping of flag names to values"}
	}
	var out []Flag
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		name := strings.TrimLeft(k.Value, "-")
		if k.Kind != yaml.ScalarNode || name == "" {
			return nil, &Error{Source: source, Line: k.Line, Msg: "flags: a flag name must be a string"}
		}
		for _, g := range out {
			if g.Name == name {
				return nil, &Error{Source: source, Line: k.Line, Msg: fmt.Sprintf("flags: %q already defined at line %d (give a list for several values)", name, g.Line)}
			}
		}
		f := Flag{Name: name, Line: k.Line}
		switch v.Kind {
		case yaml.ScalarNode:
			if v.Tag == "!!null" {
				return nil, &Error{Source: source, Line: v.Line, Msg: fmt.Sprintf("flags.%s: no value", name)}
			}
			f.Values = []string{v.Value}
		case yaml.SequenceNode:
			for _, e := range v.Content {
				if e.Kind != yaml.ScalarNode || e.Tag == "!!null" {
					return nil, &Error{Source: source, Line: e.Line, Msg: fmt.Sprintf("flags.%s: list entries must be plain values", name)}
				}
				f.Values = append(f.Values, e.Value)
			}
		default:
			return nil, &Error{Source: source, Line: v.Line, Msg: fmt.Sprintf("flags.%s: want a value or a list of values", name)}
		}
		out = append(out, f)
	}
	return out, nil
}

func parseDataset(source string, n *yaml.Node) ([]Field, error) {
	if n.Kind == 0 {
		return nil, nil
	}
	if n.Kind != yaml.MappingNode {
		return nil, &Error{Source: source, Line: n.Line, Msg: "dataset: want a mapping of StreamingDataset arguments"}
	}
	var out []Field
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.Tag != "!!str" {
			return nil, &Error{Source: source, Line: k.Line, Msg: "dataset: argument names must be strings"}
		}
		for _, f := range out {
			if f.Name == k.Value {
				return nil, &Error{Source: source, Line: k.Line, Msg: fmt.Sprintf("dataset: mapping key %q already defined at line %d", k.Value, f.Line)}
			}
		}
		var val any
		if err := v.Decode(&val); err != nil {
			return nil, yamlError(source, err)
		}
		out = append(out, Field{Name: k.Value, Value: val, Line: k.Line})
	}
	return out, nil
}

// Opener opens the store holding a config file (the caller's decorated
// opener, e.g. stores.Open over the default registry).
type Opener func(ctx context.Context, url string) (storage.Bucket, error)

// Load reads and parses a job file from a local path or a store URL
// (s3://bucket/configs/train.yaml) opened with open.
func Load(ctx context.Context, open Opener, location string) (*Config, error) {
	data, err := read(ctx, open, location)
	if err != nil {
		return nil, err
	}
	return Parse(location, data)
}

func read(ctx context.Context, open Opener, location string) ([]byte, error) {
	if !strings.Contains(location, "://") {
		fh, err := os.Open(location)
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		defer fh.Close()
		data, err := io.ReadAll(io.LimitReader(fh, MaxSize+1))
		if err != nil {
			return nil, fmt.Errorf("config: %s: %w", location, err)
		}
		return data, nil
	}
	cut := strings.LastIndex(location, "/")
	dir, key := location[:cut], location[cut+1:]
	if key == "" || strings.HasSuffix(dir, ":/") {
		return nil, &Error{Source: location, Msg: "want the URL of a file (scheme://bucket/path/file.yaml)"}
	}
	b, err := open(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("config: open %s: %w", location, err)
	}
	data, err := storage.ReadAll(ctx, b, key, MaxSize)
	err = errors.Join(err, b.Close())
	if err != nil {
		return nil, fmt.Errorf("config: read %s: %w", location, err)
	}
	return data, nil
}
