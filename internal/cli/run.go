package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicedata/sluice/config"
	"github.com/sluicedata/sluice/internal/stores"
	"github.com/sluicedata/sluice/storage"
)

// runOptions are the flags of sluice run.
type runOptions struct {
	print  bool
	dryRun bool
}

func newRunCommand(e *env) *cobra.Command {
	var o runOptions
	cmd := &cobra.Command{
		Use:   "run [CONFIG_URL]",
		Short: "Run the job a YAML file describes (convert, stream, bench, serve or train)",
		Long: `Run the job a YAML file describes: the entry point of the Sluice container
image. CONFIG_URL is a local path or a store URL (s3://bucket/configs/train.yaml);
without it, $SLUICE_CONFIG names the file.

  kind: convert | stream | bench | serve | train
  args: [...]         positional arguments of sluice convert/stream/bench
  flags: {name: v}    their flags, as in sluice <command> --help (a list for a
                      repeatable flag); serve runs sluice agent with these flags
  env: {NAME: v}      environment of the job
  command: [...]      kind train: the program to run (e.g. torchrun ... train.py),
                      started with SLUICE_CONFIG set to this file
  dataset: {...}      StreamingDataset arguments (Python:
                      StreamingDataset.from_config(os.environ["SLUICE_CONFIG"]))
  training: {...}     free-form hyperparameters for the training script

Parsing is strict: unknown keys, wrong types and flags the command does not
have are errors that name the line.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			location := os.Getenv("SLUICE_CONFIG")
			if len(args) == 1 {
				location = args[0]
			}
			if location == "" {
				return errors.New("run: give CONFIG_URL or set SLUICE_CONFIG")
			}
			return runConfig(cmd.Context(), e, o, location)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.print, "print", false, "print the checked config as JSON and exit (the Python client reads this)")
	f.BoolVar(&o.dryRun, "dry-run", false, "print the command the config runs and exit")
	return cmd
}

func runConfig(ctx context.Context, e *env, o runOptions, location string) error {
	open := func(ctx context.Context, u string) (storage.Bucket, error) {
		return stores.Open(ctx, e.registry, u, nil)
	}
	c, err := config.Load(ctx, open, location)
	if err != nil {
		return err
	}
	if o.print {
		return printConfig(e, c)
	}
	if c.Kind == "train" {
		if o.dryRun {
			fmt.Fprintln(e.stdout, shellJoin(c.Command))
			return nil
		}
		return runTrain(ctx, e, c, location)
	}
	// A fresh command tree: the job's flags are set on its subcommand,
	// then the tree runs with the positional arguments only.
	root := newRootCommand(e)
	name := config.Kinds[c.Kind]
	sub, _, err := root.Find([]string{name})
	if err != nil || sub == root || sub.Name() != name {
		return &config.Error{Source: c.Source, Msg: fmt.Sprintf("kind %s: this sluice has no %q command", c.Kind, name)}
	}
	line := []string{"sluice", name}
	line = append(line, c.Args...)
	for _, fl := range c.Flags {
		if fl.Name == "help" || sub.Flags().Lookup(fl.Name) == nil {
			return &config.Error{Source: c.Source, Line: fl.Line, Msg: fmt.Sprintf("flags.%s: sluice %s has no flag --%s (see sluice %s --help)", fl.Name, name, fl.Name, name)}
		}
		if len(fl.Values) > 1 && !repeatable(sub, fl.Name) {
			return &config.Error{Source: c.Source, Line: fl.Line, Msg: fmt.Sprintf("flags.%s: --%s takes one value, the config gives %d", fl.Name, fl.Name, len(fl.Values))}
		}
		for _, v := range fl.Values {
			if err := sub.Flags().Set(fl.Name, v); err != nil {
				return &config.Error{Source: c.Source, Line: fl.Line, Msg: fmt.Sprintf("flags.%s: %v", fl.Name, err)}
			}
			line = append(line, "--"+fl.Name+"="+v)
		}
	}
	if o.dryRun {
		fmt.Fprintln(e.stdout, shellJoin(line))
		return nil
	}
	for k, v := range c.Env {
		if err := os.Setenv(k, v); err != nil {
			return fmt.Errorf("run: env %s: %w", k, err)
		}
	}
	root.SetArgs(append([]string{name}, c.Args...))
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	return root.ExecuteContext(ctx)
}

// repeatable reports whether a flag takes several values (slices, arrays).
func repeatable(cmd *cobra.Command, name string) bool {
	t := cmd.Flags().Lookup(name).Value.Type()
	return strings.HasSuffix(t, "Slice") || strings.HasSuffix(t, "Array")
}

// runTrain runs the config's program with SLUICE_CONFIG naming the config,
// forwarding SIGTERM on cancellation, and returns its exit status.
func runTrain(ctx context.Context, e *env, c *config.Config, location string) error {
	cmd := exec.CommandContext(ctx, c.Command[0], c.Command[1:]...)
	cmd.Env = append(os.Environ(), "SLUICE_CONFIG="+location)
	for k, v := range c.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, e.stdout, e.stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code := ee.ExitCode()
		if code < 0 {
			code = 128 + int(ee.Sys().(syscall.WaitStatus).Signal())
		}
		return &ExitError{Code: code, Err: fmt.Errorf("run: %s exited with status %d", c.Command[0], code)}
	}
	if err != nil {
		return fmt.Errorf("run: %s: %w", c.Command[0], err)
	}
	return nil
}

// printConfig writes the checked config as one JSON object.
func printConfig(e *env, c *config.Config) error {
	flags := map[string][]string{}
	for _, f := range c.Flags {
		flags[f.Name] = f.Values
	}
	dataset := map[string]any{}
	lines := map[string]int{}
	for _, f := range c.Dataset {
		if _, dup := dataset[f.Name]; dup {
			return &config.Error{Source: c.Source, Line: f.Line, Msg: fmt.Sprintf("dataset.%s given twice", f.Name)}
		}
		dataset[f.Name] = f.Value
		lines[f.Name] = f.Line
	}
	doc := map[string]any{
		"source": c.Source, "kind": c.Kind, "args": c.Args, "flags": flags, "env": c.Env,
		"command": c.Command, "dataset": dataset, "dataset_lines": lines, "training": c.Training,
	}
	data, err := json.Marshal(doc)
	if err != nil {
		return &config.Error{Source: c.Source, Msg: fmt.Sprintf("cannot be written as JSON (mapping keys must be strings, numbers finite): %v", err)}
	}
	data = append(data, '\n')
	_, err = e.stdout.Write(data)
	return err
}

// shellJoin quotes words for a POSIX shell where needed.
func shellJoin(words []string) string {
	out := make([]string, len(words))
	for i, w := range words {
		if w != "" && strings.Trim(w, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=,@%+") == "" {
			out[i] = w
		} else {
			out[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
		}
	}
	return strings.Join(out, " ")
}
