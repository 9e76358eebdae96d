package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/compress"
	"github.com/sluicedata/sluice/format/hashing"
	"github.com/sluicedata/sluice/format/jsonl"
	"github.com/sluicedata/sluice/format/mds"
	"github.com/sluicedata/sluice/format/xsv"
	"github.com/sluicedata/sluice/internal/stores"
	"github.com/sluicedata/sluice/internal/version"
	"github.com/sluicedata/sluice/internal/writepipe"
	"github.com/sluicedata/sluice/storage"
)

type writeFlags struct {
	format, columns, compression, hashes string
	sizeLimit                            int64
	remote                               string
	keepLocal, existOK, noEmptyShards    bool
	maxWorkers, parallelism              int
	newline, separator                   string
	progress                             string
	maxFrame                             int64
}

// writeEvent is one line of `sluice write`'s stdout: JSON, snake_case.
type writeEvent struct {
	Event    string `json:"event"` // ready, file, done, error
	Version  string `json:"version,omitempty"`
	File     string `json:"file,omitempty"`
	Samples  int64  `json:"samples,omitempty"`
	Shards   int    `json:"shards,omitempty"`
	Bytes    int64  `json:"bytes,omitempty"`
	Error    string `json:"error,omitempty"`
	Arg      string `json:"arg,omitempty"`    // the argument an error is about
	Sample   *int64 `json:"sample,omitempty"` // the refused sample
	Seconds  string `json:"seconds,omitempty"`
	Uploaded bool   `json:"uploaded,omitempty"`
}

func newWriteCommand(e *env) *cobra.Command {
	var f writeFlags
	cmd := &cobra.Command{
		Use:   "write [flags] LOCAL_DIR",
		Short: "Write a dataset from framed sample batches on stdin (the Python writers' engine)",
		Long: `Write an MDS, JSON-lines, CSV, TSV or XSV dataset into LOCAL_DIR (and, with
--remote, upload every file to a store URL as it is finished, index.json
last) from the framed, columnar sample batches that sluice.MDSWriter and the
other Python writers send on stdin (framing: package internal/writepipe).

stdout carries one JSON object per line: {"event": "ready"} once the
arguments are checked, {"event": "file"} for each file in place, then
{"event": "done"} or {"event": "error"}. Input that ends without the end
frame abandons the dataset: shards already written stay, no index.json is
written.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runWrite(cmd.Context(), e, cmd.InOrStdin(), args[0], &f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.format, "format", "mds", "dataset format: mds, json, csv, tsv, xsv")
	fl.StringVar(&f.columns, "columns", "", `columns as a JSON object of name to encoding, e.g. '{"id": "int", "text": "str"}' (required)`)
	fl.StringVar(&f.compression, "compression", "", "shard compression: br, bz2, gz, snappy, zstd, optionally :level (default none)")
	fl.StringVar(&f.hashes, "hashes", "", "comma-separated hash algorithms for index.json, in sorted order: "+strings.Join(hashing.Names(), ", "))
	fl.Int64Var(&f.sizeLimit, "size-limit", mds.DefaultSizeLimit, "shard size limit in bytes (0: no limit, one shard)")
	fl.StringVar(&f.remote, "remote", "", "store URL to upload the dataset to (s3://, gs://, az://, file://)")
	fl.BoolVar(&f.keepLocal, "keep-local", false, "with --remote, keep the local files after upload")
	fl.BoolVar(&f.existOK, "exist-ok", false, "allow a non-empty LOCAL_DIR (files written replace existing ones)")
	fl.BoolVar(&f.noEmptyShards, "no-empty-shards", false, "do not reproduce MosaicML's empty first shard before an oversized sample")
	fl.IntVar(&f.maxWorkers, "max-workers", 0, "uploads in flight (0: 8)")
	fl.IntVar(&f.parallelism, "parallelism", 0, "shards hashed, compressed and written at once (0: one per CPU)")
	fl.StringVar(&f.newline, "newline", "\n", "record terminator (json, csv, tsv, xsv)")
	fl.StringVar(&f.separator, "separator", "", "field separator (xsv; csv and tsv have their own)")
	fl.StringVar(&f.progress, "progress", "none", "progress on stderr: "+progressValues)
	fl.Int64Var(&f.maxFrame, "max-frame", writepipe.DefaultMaxFrame, "largest accepted batch frame in bytes")
	return cmd
}

// argError is an invalid argument, reported with the argument's name so
// that the Python writers raise MosaicML's exception for it.
type argError struct {
	arg string
	err error
}

func (a *argError) Error() string { return a.err.Error() }
func (a *argError) Unwrap() error { return a.err }

// validateWrite checks the arguments one by one, each failure naming its
// argument.
func validateWrite(f *writeFlags) (cols map[string]string, hashes []string, err error) {
	if f.columns == "" {
		return nil, nil, &argError{"columns", errors.New("write: --columns is required")}
	}
	if err := json.Unmarshal([]byte(f.columns), &cols); err != nil {
		return nil, nil, &argError{"columns", fmt.Errorf("write: --columns is not a JSON object of strings: %w", err)}
	}
	if len(cols) == 0 {
		return nil, nil, &argError{"columns", errors.New("write: --columns is empty")}
	}
	if f.format == "mds" {
		names := make([]string, 0, len(cols))
		for n := range cols {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			if _, err := mds.ParseEncoding(cols[n]); err != nil {
				return nil, nil, &argError{"columns", fmt.Errorf("write: column %q: %w", n, err)}
			}
		}
	}
	if _, err := compress.Parse(f.compression); err != nil {
		return nil, nil, &argError{"compression", fmt.Errorf("write: %w", err)}
	}
	if f.hashes != "" {
		hashes = strings.Split(f.hashes, ",")
	}
	for i, h := range hashes {
		if i > 0 && hashes[i-1] >= h {
			return nil, nil, &argError{"hashes", errors.New("write: hashes must be unique and in sorted order")}
		}
		if !hashing.Valid(h) {
			return nil, nil, &argError{"hashes", fmt.Errorf("write: unknown hash algorithm %q (known: %s)", h, strings.Join(hashing.Names(), ", "))}
		}
	}
	if f.sizeLimit < 0 || f.sizeLimit >= 1<<32 {
		return nil, nil, &argError{"size_limit", fmt.Errorf("write: --size-limit %d must be in [0, 2^32)", f.sizeLimit)}
	}
	if f.maxWorkers < 0 || f.parallelism < 0 {
		return nil, nil, &argError{"max_workers", errors.New("write: --max-workers and --parallelism must not be negative")}
	}
	if _, err := parseProgress(f.progress); err != nil {
		return nil, nil, &argError{"progress", fmt.Errorf("write: %w", err)}
	}
	return cols, hashes, nil
}

// openSink creates the format writer for dir.
func openSink(f *writeFlags, dir string, cols map[string]string, hashes []string, done func(string, string) error) (writepipe.Sink, error) {
	switch f.format {
	case "mds":
		return mds.NewWriter(dir, &mds.WriterOptions{
			Columns: cols, Compression: f.compression, Hashes: hashes, SizeLimit: f.sizeLimit,
			OnFileDone: done, ExistOK: f.existOK, NoEmptyShards: f.noEmptyShards, Parallelism: f.parallelism,
		})
	case "json", "jsonl":
		return jsonl.NewWriter(dir, &jsonl.WriterOptions{
			Columns: cols, Newline: f.newline, Compression: f.compression, Hashes: hashes, SizeLimit: f.sizeLimit,
			OnFileDone: done, ExistOK: f.existOK, NoEmptyShards: f.noEmptyShards, Parallelism: f.parallelism,
		})
	case "csv", "tsv", "xsv":
		return xsv.NewWriter(dir, &xsv.WriterOptions{
			Format: f.format, Columns: cols, Separator: f.separator, Newline: f.newline,
			Compression: f.compression, Hashes: hashes, SizeLimit: f.sizeLimit,
			OnFileDone: done, ExistOK: f.existOK, NoEmptyShards: f.noEmptyShards, Parallelism: f.parallelism,
		})
	}
	return nil, &argError{"format", fmt.Errorf("write: unknown --format %q (want mds, json, csv, tsv or xsv)", f.format)}
}

func runWrite(ctx context.Context, e *env, stdin io.Reader, dir string, f *writeFlags) (err error) {
	var mu sync.Mutex // events come from the writer's goroutine too
	enc := json.NewEncoder(e.stdout)
	emit := func(ev writeEvent) {
		mu.Lock()
		defer mu.Unlock()
		_ = enc.Encode(ev)
	}
	defer func() {
		if err == nil {
			return
		}
		ev := writeEvent{Event: "error", Error: err.Error()}
		var ae *argError
		if errors.As(err, &ae) {
			ev.Arg = ae.arg
		}
		var se *writepipe.SampleError
		if errors.As(err, &se) {
			ev.Sample = &se.Index
		}
		emit(ev)
	}()
	start := time.Now()
	cols, hashes, err := validateWrite(f)
	if err != nil {
		return err
	}
	var pub *storage.Publisher
	if f.remote != "" {
		b, err := stores.Open(ctx, e.registry, f.remote, nil)
		if err != nil {
			return &argError{"out", fmt.Errorf("write: remote %s: %w", f.remote, err)}
		}
		defer b.Close()
		workers := f.maxWorkers
		if workers == 0 {
			workers = 8
		}
		pub = storage.NewPublisher(ctx, b, &storage.PublishOptions{Concurrency: workers, RemoveLocal: !f.keepLocal})
	}
	var files int
	done := func(name, path string) error {
		if pub != nil {
			if err := pub.OnFileDone(name, path); err != nil {
				return err
			}
		}
		files++
		emit(writeEvent{Event: "file", File: name})
		return nil
	}
	sink, err := openSink(f, dir, cols, hashes, done)
	if err != nil {
		var ae *argError
		if !errors.As(err, &ae) && strings.Contains(err.Error(), "not empty") {
			err = &argError{"exist_ok", err}
		}
		return err
	}
	names := make([]string, 0, len(cols))
	for n := range cols {
		names = append(names, n)
	}
	sort.Strings(names)
	emit(writeEvent{Event: "ready", Version: version.Number()})

	mode, _ := parseProgress(f.progress)
	var bar *throttledLine
	if mode.show(e.stderr) {
		bar = newThrottledLine(e.stderr, "write")
	}
	st, err := writepipe.Run(ctx, writepipe.NewReader(stdin, names, f.maxFrame), sink, func(st writepipe.Stats) {
		if bar != nil {
			bar.update(fmt.Sprintf("%d samples, %s in", st.Samples, humanBytes(st.Bytes)))
		}
	})
	if bar != nil {
		bar.done()
	}
	if err != nil {
		if pub != nil {
			_ = pub.Wait()
		}
		return fmt.Errorf("write: %w", err)
	}
	if pub != nil {
		// index.json was uploaded last by OnFileDone; wait for the rest.
		if err := pub.Wait(); err != nil {
			return fmt.Errorf("write: upload: %w", err)
		}
		if !f.keepLocal {
			_ = os.Remove(dir) // only when empty: nothing else is deleted
		}
	}
	var shards int
	if s, ok := sink.(interface{ Shards() []format.ShardInfo }); ok {
		shards = len(s.Shards())
	}
	emit(writeEvent{Event: "done", Samples: st.Samples, Shards: shards, Bytes: st.Bytes,
		Seconds: fmt.Sprintf("%.3f", time.Since(start).Seconds()), Uploaded: pub != nil})
	return nil
}
