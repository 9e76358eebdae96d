package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
	"golang.org/x/sync/errgroup"

	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/stream"
)

type cpFlags struct {
	concurrency  int
	skipExisting bool
	progress     string
	store        storeFlags
}

func newCpCommand(e *env) *cobra.Command {
	var f cpFlags
	cmd := &cobra.Command{
		Use:   "cp SRC DST",
		Short: "Copy a dataset between stores",
		Long: `Copy every object under SRC to DST, in parallel, between any two stores (local
paths, file://, s3://, gs://, az://, and http(s):// as a source). Bytes stream
from one store to the other without touching local disk. Index files
(index.json) are copied after every shard, so a reader never sees an index
that names a missing shard; an object that fails to copy never appears at
DST. Plain HTTP cannot list, so an http(s) SRC is copied through the files its
index.json names. WebDataset tars named by a brace pattern or a "::" list (as
sluice stream takes them) are copied as the pattern names them, from the
directory holding them to DST.

Progress counts objects committed at DST (and their bytes), not bytes read:
--progress auto draws a bar on a terminal and prints lines otherwise; a final
line gives the objects, bytes and rate.`,
		Example: `  sluice cp s3://my-bucket/c4/train gs://mirror/c4/train
  sluice cp --skip-existing https://example.com/ds ./ds
  sluice cp 'https://example.com/wds/shard-{000000..000099}.tar' ./wds`,
		Args: cobra.ExactArgs(2),
		RunE: storeRunE(&f.store, func(cmd *cobra.Command, args []string) error {
			return runCp(cmd.Context(), e, args[0], args[1], &f)
		}),
	}
	addStoreFlags(cmd, &f.store)
	cmd.Flags().IntVarP(&f.concurrency, "concurrency", "j", 16, "objects copied at once")
	cmd.Flags().BoolVar(&f.skipExisting, "skip-existing", false, "skip objects that exist at DST with the same size (resume a copy)")
	cmd.Flags().StringVar(&f.progress, "progress", "auto", "progress display: "+progressValues)
	return cmd
}

func runCp(ctx context.Context, e *env, src, dst string, f *cpFlags) (err error) {
	if f.concurrency <= 0 {
		return fmt.Errorf("cp: --concurrency must be positive, got %d", f.concurrency)
	}
	mode, err := parseProgress(f.progress)
	if err != nil {
		return fmt.Errorf("cp: %w", err)
	}
	// WebDataset tars named by a pattern (shard-{000..099}.tar, a "::"
	// list): the shards it names, from the directory holding them.
	td, err := stream.ParseTarDataset(src)
	if err != nil {
		return fmt.Errorf("cp: %w", err)
	}
	root := src
	if td != nil {
		root = td.Root
	}
	sb, err := openStore(ctx, e, root)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, ignoreClosed(sb.Close())) }()
	db, err := openStore(ctx, e, dst)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, ignoreClosed(db.Close())) }()
	if sameRoot(sb.URL(""), db.URL("")) {
		return fmt.Errorf("cp: source and destination are the same place (%s)", sb.URL(""))
	}

	var objects []storage.ObjectInfo
	if td != nil {
		objects, err = statObjects(ctx, sb, td.Keys, f.concurrency)
	} else {
		objects, err = listObjects(ctx, sb)
	}
	if err != nil {
		return fmt.Errorf("cp: list %s: %w", storage.RedactURL(src), err)
	}
	if len(objects) == 0 {
		return fmt.Errorf("cp: no objects under %s", storage.RedactURL(src))
	}
	var total int64
	for _, o := range objects {
		total += o.Size
	}

	opts := &storage.CopyTreeOptions{
		Concurrency:  f.concurrency,
		SkipExisting: f.skipExisting,
		Objects:      objects,
	}
	var stopBar func(ok bool)
	switch mode.resolve(e.stderr) {
	case "bar":
		opts.OnObject, stopBar = cpProgressBar(e.stderr, total, len(objects))
	case "plain":
		opts.OnObject, stopBar = cpProgressLines(e.stderr, total, len(objects))
	}
	start := time.Now()
	stats, err := storage.CopyTree(ctx, sb, db, opts)
	elapsed := time.Since(start)
	if stopBar != nil {
		stopBar(err == nil)
	}
	if err != nil {
		return fmt.Errorf("cp: %w (%d objects, %s copied before the failure)", err, stats.Objects, humanBytes(stats.Bytes))
	}
	fmt.Fprintln(e.stdout, cpSummary(stats, elapsed))
	return nil
}

// statObjects describes the objects keys of b (concurrency at once), in
// the order of keys; a missing one is an error naming it.
func statObjects(ctx context.Context, b storage.Bucket, keys []string, concurrency int) ([]storage.ObjectInfo, error) {
	out := make([]storage.ObjectInfo, len(keys))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(concurrency)
	for i, k := range keys {
		g.Go(func() error {
			info, err := b.Stat(gctx, k)
			if err != nil {
				return err
			}
			out[i] = info
			return nil
		})
	}
	return out, g.Wait()
}

// cpSummary is the final line of cp.
func cpSummary(s storage.CopyStats, elapsed time.Duration) string {
	secs := max(elapsed.Seconds(), 1e-3)
	line := fmt.Sprintf("copied %d objects, %s in %s (%s/s, %.1f objects/s)",
		s.Objects, humanBytes(s.Bytes), elapsed.Round(time.Millisecond), humanBytes(int64(float64(s.Bytes)/secs)), float64(s.Objects)/secs)
	if s.Skipped > 0 {
		line += fmt.Sprintf("; skipped %d already present", s.Skipped)
	}
	return line
}

// sameRoot reports whether two bucket roots overlap (one inside the other),
// where a copy would read what it writes.
func sameRoot(a, b string) bool {
	a, b = strings.TrimSuffix(a, "/")+"/", strings.TrimSuffix(b, "/")+"/"
	return strings.HasPrefix(a, b) || strings.HasPrefix(b, a)
}

// cpProgressBar draws a bar of the objects committed at the destination,
// with their bytes, rate and ETA. The returned stop completes (ok) or
// aborts the bar and waits for its last frame.
func cpProgressBar(w io.Writer, total int64, objects int) (onObject func(storage.ObjectInfo, bool), stop func(ok bool)) {
	p := mpb.New(mpb.WithOutput(w), mpb.WithWidth(40), mpb.WithAutoRefresh())
	var bytes atomic.Int64
	// Created without a total, so that reaching it does not complete the
	// bar before the last object is counted; stop completes it.
	bar := p.New(0, mpb.BarStyle(),
		mpb.PrependDecorators(
			decor.Any(func(s decor.Statistics) string { return fmt.Sprintf("cp %d/%d objects ", s.Current, objects) }),
			decor.Any(func(decor.Statistics) string {
				return fmt.Sprintf("%s / %s", humanBytes(bytes.Load()), humanBytes(total))
			}),
		),
		mpb.AppendDecorators(
			decor.AverageSpeed(0, " %.1f objects/s"),
			decor.Name("  ETA "),
			decor.AverageETA(decor.ET_STYLE_GO),
		),
	)
	bar.SetTotal(int64(objects), false)
	onObject = func(info storage.ObjectInfo, skipped bool) {
		bytes.Add(info.Size)
		bar.Increment()
	}
	stop = func(ok bool) {
		if ok {
			bar.SetTotal(-1, true)
		} else {
			bar.Abort(false)
		}
		p.Wait()
	}
	return onObject, stop
}

// cpProgressLines prints a line of the objects committed every few
// seconds (for logs), and a last one at the end.
func cpProgressLines(w io.Writer, total int64, objects int) (onObject func(storage.ObjectInfo, bool), stop func(ok bool)) {
	line := newThrottledLine(w, "cp")
	var n, bytes atomic.Int64
	onObject = func(info storage.ObjectInfo, skipped bool) {
		done, b := n.Add(1), bytes.Add(info.Size)
		line.update(fmt.Sprintf("%d/%d objects, %s / %s committed", done, objects, humanBytes(b), humanBytes(total)))
	}
	return onObject, func(bool) { line.done() }
}
